"""Helpers the tests share: paths and configs, a real `memoryd serve` process, LLM fixtures (a
real llama.cpp server, and named fakes for what a test must control), the oracle labeller, JSON
views of the façade's results, and the scripts tests run in child processes."""

"""Keeping a data directory safe: `memoryd backup`, `verify`, `restore`, `token rotate`."""

from __future__ import annotations

from pathlib import Path

import click

from memoryd.cli.base import config_options, domain_errors, load, setup_logging
from memoryd.errors import ConfigError, DataDirBusyError
from memoryd.files import data_dir_in_use
from memoryd.tokens import rotate_token

users_option = click.option(
    "--user", "users", multiple=True, help="Only this user (repeat for more; default: all)."
)


@click.command("backup")
@config_options
@click.argument("dest", type=click.Path(path_type=Path, file_okay=False))
@users_option
@domain_errors
def backup_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    dest: Path,
    users: tuple[str, ...],
) -> None:
    """Copy every user's journal into DEST (a new directory) with an export of each and a
    manifest of counts and checksums. Safe while the daemon serves: each journal is copied
    with SQLite's backup API as one consistent snapshot. Check it with `memoryd verify DEST`.

    Nightly, with systemd: see "Backups" in the README for a timer."""
    from memoryd.backup import backup

    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    manifest = backup(config, dest, users, progress=click.echo)
    click.echo(f"backed up {len(manifest['users'])} users into {dest}")


@click.command("verify")
@config_options
@click.argument("src", type=click.Path(path_type=Path, exists=True, file_okay=False))
@users_option
@domain_errors
def verify_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    src: Path,
    users: tuple[str, ...],
) -> None:
    """Check the backup in SRC by replaying it: each journal passes SQLite's integrity check
    and matches the manifest's counts and log checksum, opens in a scratch data directory with
    its graph and vectors rebuilt, and its export imports to the same counts. Exit status 1 if
    any user fails."""
    from memoryd.backup import verify

    setup_logging("warning")
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    verdicts = verify(config, src, users, progress=click.echo)
    failed = [v.user_id for v in verdicts if v.problems]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(verdicts)} users fail: {failed}")
    click.echo(f"{len(verdicts)} users verified ({sum(v.turns for v in verdicts)} turns)")


@click.command("restore")
@config_options
@click.argument("src", type=click.Path(path_type=Path, exists=True, file_okay=False))
@users_option
@click.option("--replace", is_flag=True, help="Overwrite users that have data.")
@domain_errors
def restore_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    src: Path,
    users: tuple[str, ...],
    replace: bool,
) -> None:
    """Restore the journals of the backup in SRC into the data directory (the daemon must be
    stopped). Each copy is checked first (integrity and the manifest's checksum); a user that
    has data is kept unless --replace. The daemon rebuilds the graph and vectors of restored
    users when it starts."""
    from memoryd.backup import restore

    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    if data_dir_in_use(config.data_dir):
        raise DataDirBusyError(str(config.data_dir))
    restored = restore(config, src, users, replace, progress=click.echo)
    click.echo(f"restored {len(restored)} users into {config.data_dir}")


@click.group()
def token() -> None:
    """The API token (<data-dir>/token, mode 0600)."""


@token.command()
@config_options
@domain_errors
def rotate(config_path: Path | None, data_dir: Path | None, model_dir: Path | None) -> None:
    """Replace the token with a new one. A running daemon refuses the old token from its next
    request on, without a restart; clients that read the token file (the CLI, `memoryd mcp`)
    pick up the new one. Agents configured with the token itself need the new value: read it
    from the file this prints."""
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    if config.auth.token:
        raise ConfigError(
            "auth.token",
            "***",
            "the token is set in the configuration (or MEMORYD_AUTH_TOKEN); change it there "
            "and restart the daemon",
        )
    path = rotate_token(config.data_dir)
    click.echo(f"a new token is in {path}; the old one is refused from now on")

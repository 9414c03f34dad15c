"""Generate the router's synthetic seed set, ``models/router_seed.jsonl`` (round S0).

Every line is written from a hand-made template with slots filled from small vocabularies:

    {"text": "Remind me to call the dentist on Monday.", "labels": ["working"], "group": "wrk-03"}

``group`` names the template. ``scripts/train_router.py`` holds out whole groups for its test
split, so the held-out score measures templates the head never saw, not paraphrases of them.
The output is deterministic (fixed seed, fixed order): run it again and the file is identical.

    python scripts/make_router_seed.py --out models/router_seed.jsonl

The same templates also make the labelled stream of ``make eval-router`` (``memoryd eval
router-loop``): another RNG seed, more lines per template, and no line of the seed set
(``--exclude`` compares texts case-folded, final full stop dropped, as the uncased encoder sees
them). The vocabularies are small, so more lines are only new slot fillings of the same 290
templates: with ``--rng-seed 7 --exclude models/router_seed.jsonl``, ``--fills`` 10, 20, 40 and 200
give 2,851, 5,573, 10,743 and 48,314 lines from 284 templates (6 have no line left that is not in
the seed set).

    python scripts/make_router_seed.py --rng-seed 7 --fills 20 \\
        --exclude models/router_seed.jsonl --out eval-data/router_stream.jsonl

Nothing here is copied from a dataset; the casual-chat templates imitate the style of two
friends catching up (greeting, news, reaction, question) without reusing any real text.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

SEED = 20240601
FILLS_PER_TEMPLATE = 6
SHORT_FILLS = 20
ATTEMPTS_PER_FILL = 4
"""A template with few slot values stops early: it yields only the distinct texts it can."""

E, S, P, W, F = "episodic", "semantic", "procedural", "working", "fragmented"

VOCAB: dict[str, tuple[str, ...]] = {
    "name": (
        "Hana",
        "Marco",
        "Leila",
        "Tariq",
        "Zoe",
        "Nils",
        "Chloe",
        "Ravi",
        "Priya",
        "Tom",
        "Aisha",
        "Luca",
        "Ines",
        "Kenji",
        "Elena",
        "Omar",
        "Dana",
        "Felix",
        "Rosa",
        "Ben",
    ),
    "rel": (
        "sister",
        "brother",
        "mom",
        "dad",
        "grandma",
        "grandpa",
        "cousin",
        "best friend",
        "partner",
        "husband",
        "wife",
        "son",
        "daughter",
        "neighbor",
        "boss",
        "roommate",
        "aunt",
    ),
    "city": (
        "Oslo",
        "Lisbon",
        "Denver",
        "Toronto",
        "Kyoto",
        "Nairobi",
        "Austin",
        "Dublin",
        "Melbourne",
        "Krakow",
        "Seattle",
        "Barcelona",
        "Montreal",
        "Glasgow",
        "Porto",
        "Boise",
    ),
    "place": (
        "the beach",
        "the farmers market",
        "the lake",
        "the climbing gym",
        "the art museum",
        "the park",
        "the new ramen place",
        "the library",
        "the mountains",
        "the aquarium",
        "the botanical garden",
        "the county fair",
        "the bowling alley",
        "the zoo",
        "the pier",
    ),
    "past": (
        "yesterday",
        "last weekend",
        "last Saturday",
        "two days ago",
        "this morning",
        "last night",
        "on Friday",
        "last month",
        "over the holidays",
        "a couple of weeks ago",
        "on Sunday afternoon",
        "last summer",
        "earlier today",
        "on Tuesday evening",
    ),
    "future": (
        "tomorrow",
        "tonight",
        "on Monday",
        "next week",
        "at 5 pm",
        "tomorrow at 9",
        "on Friday morning",
        "this afternoon",
        "before lunch",
        "after work",
        "on the 15th",
        "in an hour",
        "first thing tomorrow",
        "by Thursday",
    ),
    "time": ("7:00", "6:30", "21:15", "8:45", "13:00", "18:30", "7:45", "22:00", "9:10", "16:20"),
    "med": (
        "ibuprofen",
        "metformin",
        "lisinopril",
        "vitamin D",
        "allergy pills",
        "antibiotics",
        "levothyroxine",
        "melatonin",
        "albuterol",
        "omeprazole",
        "blood pressure pills",
        "iron supplements",
        "sertraline",
        "atorvastatin",
    ),
    "dose": (
        "500 mg",
        "10 mg",
        "2 puffs",
        "one tablet",
        "20 mg",
        "1000 IU",
        "5 mg",
        "two capsules",
    ),
    "allergen": (
        "penicillin",
        "peanuts",
        "shellfish",
        "cats",
        "pollen",
        "latex",
        "ibuprofen",
        "tree nuts",
        "sesame",
        "bee stings",
        "sulfa drugs",
        "dust mites",
    ),
    "food": (
        "sushi",
        "spicy food",
        "oat milk",
        "dark chocolate",
        "pineapple on pizza",
        "black coffee",
        "green tea",
        "tacos",
        "mushrooms",
        "olives",
        "cilantro",
        "blue cheese",
        "oatmeal",
    ),
    "hobby": (
        "hiking",
        "painting",
        "swimming",
        "running",
        "yoga",
        "playing guitar",
        "baking",
        "gardening",
        "rock climbing",
        "chess",
        "photography",
        "knitting",
        "pottery",
        "surfing",
    ),
    "task": (
        "call the dentist",
        "pay the rent",
        "renew my passport",
        "book the vet",
        "email the landlord",
        "pick up the dry cleaning",
        "buy milk",
        "water the plants",
        "submit the expense report",
        "back up my laptop",
        "order more printer ink",
        "return the library books",
        "schedule the car service",
        "send the birthday card",
        "refill my prescription",
        "cancel the gym membership",
        "text the babysitter",
        "file the tax forms",
    ),
    "done": (
        "paid the electricity bill",
        "sent the invoice",
        "booked the flights",
        "picked up the prescription",
        "called the insurance company",
        "cleaned out the fridge",
        "signed the lease",
        "submitted the grant application",
        "fixed the bike tire",
        "dropped off the package",
        "finished the quarterly report",
        "walked the dog",
    ),
    "pet": ("dog", "cat", "puppy", "parrot", "rabbit", "kitten", "turtle", "hamster"),
    "pet_name": ("Luna", "Max", "Pixel", "Biscuit", "Toby", "Daisy", "Mochi", "Oscar", "Pepper"),
    "job": (
        "nurse",
        "teacher",
        "software engineer",
        "chef",
        "accountant",
        "graphic designer",
        "electrician",
        "paramedic",
        "pharmacist",
        "architect",
        "social worker",
        "pilot",
    ),
    "event": (
        "birthday party",
        "wedding",
        "job interview",
        "team offsite",
        "parent-teacher meeting",
        "book club meeting",
        "charity run",
        "family reunion",
        "concert",
        "graduation",
    ),
    "appt": (
        "dentist appointment",
        "physio session",
        "haircut",
        "team standup",
        "dermatology check",
        "parent-teacher meeting",
        "car inspection",
        "therapy session",
        "eye exam",
        "vet visit",
    ),
    "drug": ("metformin", "lisinopril", "levothyroxine", "omeprazole", "amoxicillin", "sertraline"),
    "party": ("birthday party", "wedding", "housewarming", "farewell party", "New Year's party"),
    "q": (
        "How did it go?",
        "What happened next?",
        "Tell me more!",
        "Did you have fun?",
        "What was the best part?",
        "How do you feel about it?",
        "Any plans for the weekend?",
        "What made you pick that?",
        "How's everything on your end?",
        "Was it worth it?",
    ),
    "thanks": (
        "thanks",
        "thank you",
        "thx",
        "ty",
        "thanks a lot",
        "cheers",
        "much appreciated",
        "thank you so much",
        "many thanks",
    ),
    "okay": ("ok", "okay", "Ok", "OK", "ok!", "okay!", "k", "okie", "alright", "ok ok", "oh ok"),
    "agree": ("totally", "I know right", "same here", "fair enough", "for sure", "exactly"),
    "bye": ("Talk soon", "Take care", "See ya", "Catch you later", "Bye for now", "Good night"),
    "noise": (
        "sync ok",
        "heartbeat received",
        "app opened",
        "screen unlocked",
        "wifi connected",
        "bluetooth reconnected",
        "notification dismissed",
        "session resumed",
        "cache cleared",
        "battery 80%",
        "update check: none available",
        "keyboard shown",
    ),
    "drink": ("alcohol", "coffee", "soda", "energy drinks"),
    "month": ("March", "July", "October", "January", "May"),
    "day": ("3rd", "14th", "22nd", "9th", "30th"),
    "blood": ("O negative", "A positive", "B negative", "AB positive"),
    "seat": ("window", "aisle"),
    "fear": ("heights", "spiders", "deep water", "flying", "dogs", "needles"),
    "diet": ("vegan", "vegetarian", "pescatarian", "gluten-free", "halal", "kosher"),
    "surname": ("Alvarez", "Okafor", "Lindqvist", "Nakamura", "Brennan", "Haddad"),
    "street": ("Pine", "Maple", "Harbor", "Elm", "Station"),
    "crowd": ("crowded places", "loud bars", "big parties", "packed trains", "shopping malls"),
    "value": ("Family", "My health", "Honesty", "My faith", "Freedom", "My kids"),
    "weather": ("snows", "rains hard", "storms", "gets icy", "floods"),
    "door": ("back door", "garage", "balcony door", "front gate"),
    "plant": ("tomatoes", "herbs", "roses", "lawn", "seedlings"),
    "weekday": ("Sunday", "Monday", "Friday", "Wednesday"),
    "appliance": ("dishwasher", "washing machine", "dryer", "lights", "heating", "coffee machine"),
    "warning": ("check engine", "oil", "battery", "tire pressure"),
    "toy": ("tablet", "remote", "lego", "video games", "bike"),
    "gadget": ("laptop", "phone", "photo library", "work files"),
    "doc": ("contract", "budget slides", "lease", "tax forms", "grant report", "photos"),
    "chore": ("laundry", "oven", "bread dough", "slow cooker", "kids"),
    "tradesperson": ("plumber", "electrician", "cable guy", "cleaner", "painter"),
    "bodypart": ("knee", "back", "ankle", "shoulder", "wrist"),
    "age": ("3", "5", "7", "12", "34", "41", "29"),
    "genre": ("jazz", "hip hop", "country", "classical", "indie rock", "k-pop"),
    "cause": (
        "animal rescue",
        "climate action",
        "LGBTQ rights",
        "mental health awareness",
        "adult literacy",
        "food security",
    ),
    "item": ("eggs", "oat milk", "coffee filters", "bananas", "dish soap", "batteries", "rice"),
    "hr": ("150", "160", "165", "170", "175", "180"),
    "km": ("3.1", "5.2", "7.8", "10.0", "12.4", "21.1"),
    "mins": ("18", "25", "31", "47", "58", "112"),
    "bp": ("128/84", "135/88", "118/76", "142/91", "121/79"),
    "glucose": ("4.2", "5.6", "7.8", "9.1", "11.3"),
    "condition": (
        "type 2 diabetes",
        "asthma",
        "high blood pressure",
        "celiac disease",
        "migraines",
        "a thyroid condition",
        "ADHD",
        "sleep apnea",
        "eczema",
        "a heart murmur",
    ),
    "lang": ("Spanish", "Japanese", "Portuguese", "German", "Korean", "Italian", "Arabic"),
    "dish": ("lasagna", "banana bread", "lentil curry", "pancakes", "ramen", "paella", "chili"),
    "device": ("router", "thermostat", "smart speaker", "printer", "robot vacuum", "smartwatch"),
    "hi": ("Hey", "Hi", "Hey there", "Hello", "Yo", "Morning", "Heyyy"),
    "wow": ("Wow", "Oh wow", "Omg", "Whoa", "Aww", "Haha", "Ooh", "No way", "Yay"),
    "adj": (
        "awesome",
        "amazing",
        "so cool",
        "great",
        "lovely",
        "wonderful",
        "incredible",
        "super sweet",
        "hilarious",
        "so exciting",
        "adorable",
        "impressive",
    ),
    "ack": (
        "ok",
        "okay",
        "k",
        "kk",
        "hmm",
        "lol",
        "haha",
        "yep",
        "sure",
        "thanks",
        "ty",
        "cool",
        "nice",
        "wow",
        "omg",
        "right",
        "true",
        "yeah",
        "mhm",
        "uh huh",
        "np",
        "ok!",
        "sure thing",
        "got it",
        "alright",
        "lmao",
        "haha nice",
        "oh nice",
        "ah ok",
        "same",
        "word",
        "noted",
    ),
    "emoji": (":)", ":D", "<3", ";)", "xD", "^^", "!!", "??"),
    "opener": (
        "Hey {name}! ",
        "Oh nice, ",
        "Haha, ",
        "Thanks, {name}! ",
        "Honestly, ",
        "So, ",
        "Guess what? ",
        "Good to hear from you! ",
        "Oh, by the way, ",
        "Ugh, ",
    ),
    "closer": (
        " What about you?",
        " Anyway, how are you?",
        " Just so you know.",
        " Hope you're well!",
        " Talk soon!",
        " Just thought I'd mention it.",
    ),
}

# (group prefix, labels, fills per template, templates). One template = one group.
TEMPLATES: tuple[tuple[str, tuple[str, ...], int, tuple[str, ...]], ...] = (
    (
        "epi",
        (E,),
        FILLS_PER_TEMPLATE,
        (
            "We went hiking near {city} {past} and got caught in the rain.",
            "I ran into {name} at {place} {past}, we hadn't seen each other in years.",
            "{past} my {rel} and I spent the whole day at {place}.",
            "I went to {name}'s {party} {past} and danced until midnight.",
            "Took the kids to {place} {past}, they loved it.",
            "I finished my first half marathon {past}!",
            "Our {pet} {pet_name} got out of the yard {past}; a neighbor found the escapee.",
            "I had a really bad migraine {past} and had to leave work early.",
            "Our flight to {city} was delayed three hours {past}.",
            "{past} I joined a running club meetup at {place}; everyone was welcoming.",
            "I sketched the old lighthouse {past}, my first drawing in ages.",
            "{name} and I tried {place} {past}, the food was incredible.",
            "log: workout recorded: {km} km run in {mins} min, avg HR {hr}",
            "log: sleep tracked last night: 6 h {mins} min, 3 awakenings",
            "log: fall detected at {time}, user responded OK",
            "Blood pressure was {bp} at the clinic {past}.",
            "My glucose was {glucose} after dinner {past}.",
            "I got stung by a wasp at {place} {past}.",
            "We celebrated my {rel}'s birthday at {place} {past}.",
            "I gave a talk at work {past} and my hands were shaking the whole time.",
            "{past} I twisted my knee playing soccer.",
            "The power went out during dinner {past}, we ate by candlelight.",
            "I met {name} for coffee {past} and she told me she's moving.",
            "Went {hobby} with my {rel} {past}; my legs are still sore.",
            "We drove up to {city} {past} to see the autumn leaves.",
            "I got my first tattoo {past}, a little wave on my wrist.",
            "Our team won the trivia night at the pub {past}.",
            "I saw a fox in the backyard {past} around {time}.",
            "I burned the {dish} {past} and the smoke alarm went off.",
            "The car broke down on the highway {past} and we waited two hours for a tow.",
            "I visited my old school in {city} {past}, everything felt smaller.",
            "We adopted a {pet} {past}, we named her {pet_name}.",
            "I had my {appt} {past}; it went fine.",
            "log: trip ended: 42 km drive, arrived home at {time}",
            "log: heart rate alert: {hr} bpm during workout at {time}",
            "My {rel} surprised me with concert tickets {past}.",
            "I lost my wallet at {place} {past} but someone turned it in.",
            "I tried {hobby} for the first time {past} and fell a lot.",
            "We had a huge family dinner {past}, twelve people at the table.",
            "{name} came over {past} and we watched old movies until 2 am.",
            "Guess what, I got promoted at work {past}!",
            "We had a picnic at {place} {past} and {pet_name} chased the ducks.",
            "The storm {past} knocked a tree onto our fence.",
            "My {rel} and I baked {dish} together {past}, it turned out great.",
            "I volunteered at the food bank {past}, we packed 300 boxes.",
            "I watched the sunrise from {place} {past}, totally worth the early alarm.",
            "log: place visited: {place}, {time} to 15:40",
            "I had a long chat with {name} {past} about moving to {city}.",
            "My son scored his first goal at soccer practice {past}!",
            "We got stuck in traffic for two hours on the way to {city} {past}.",
            "I read a whole novel on the train {past}, couldn't put it down.",
        ),
    ),
    (
        "sem",
        (S,),
        FILLS_PER_TEMPLATE,
        (
            "I'm allergic to {allergen}.",
            "My {rel} lives in {city}.",
            "My {rel} works as a {job}.",
            "I'm a {job}, been doing it for about ten years.",
            "I can't stand {food}.",
            "I absolutely love {food}.",
            "I have {condition}.",
            "My {pet} is called {pet_name}.",
            "{name} is my {rel}'s oldest friend.",
            "I'm vegetarian and I don't drink {drink}.",
            "My favorite way to unwind is {hobby}.",
            "I've been learning {lang} for two years.",
            "I'm left-handed, and so is my {rel}.",
            "My birthday is on {month} {day}.",
            "{name} is allergic to {allergen}.",
            "I grew up in {city} but moved away for college.",
            "I take {med} every day for my {condition}.",
            "My blood type is {blood}.",
            "I prefer {seat} seats on planes and trains.",
            "I'm terrified of {fear}.",
            "My {rel} {name} is a {job} in {city}.",
            "I'm really into {hobby} these days, it's my thing.",
            "I'd love to retrain as a {job} someday; that's my long-term goal.",
            "{hobby} is my therapy; nothing clears my head like it.",
            "log: profile updated: preferred language = {lang}",
            "log: profile updated: dietary preference = {diet}",
            "{name} is {diet} and lactose intolerant.",
            "My doctor is Dr. {surname} at the clinic on {street} Street.",
            "{name} and I have been best friends since kindergarten.",
            "I'm a morning person; my {rel} is a total night owl.",
            "My {rel} is vegan and hates cooking.",
            "I don't like {crowd}, they make me anxious.",
            "I've supported the {city} soccer club since I was a kid.",
            "{value} is the most important thing to me.",
            "I speak {lang} fluently because my mom is from there.",
            "My {rel} has {condition}.",
            "I'm married to {name}, we have two kids.",
            "I'm not a fan of {hobby}, never was.",
            "I use a wheelchair; my {rel} uses a hearing aid.",
            "{name}'s favorite food is {food}.",
            "My {rel}'s name is {name}.",
            "I work night shifts as a {job}.",
            "I have two kids, a {age}-year-old and a baby.",
            "I'm training to become a {job}.",
            "My favorite kind of music is {genre}.",
            "I live in a small apartment in {city} with my {pet}.",
            "{name} has {condition} and takes {med} for it.",
            "I'm {age} years old and my {rel} is two years younger.",
            "I'm a huge fan of {genre} concerts, I go to every one I can.",
            "My go-to comfort food is {dish}.",
            "I've always been passionate about {cause}; it's a big part of who I am.",
        ),
    ),
    (
        "pro",
        (P,),
        FILLS_PER_TEMPLATE,
        (
            "If my heart rate goes over {hr}, slow down to a walk.",
            "When it {weather}, take the train instead of driving.",
            "Whenever I feel a migraine coming, take {med} and lie down in a dark room.",
            "To reset the {device}, hold the power button for ten seconds until the light blinks.",
            "Before a long run, eat something light an hour ahead and drink water.",
            "If I miss a dose of {med}, take it unless the next one is close; never double up.",
            "To make {dish}, first preheat the oven, then layer everything and bake 40 minutes.",
            "When {name} calls during work hours, let it go to voicemail and text back later.",
            "Always check the stove and lock the {door} before leaving the house.",
            "Rule: no screens after {time} on weeknights.",
            "If a package arrives while I'm out, ask {name} next door to hold it.",
            "When my blood sugar is below 4, eat 15 g of fast carbs and recheck in {mins} minutes.",
            "If it's over 30 degrees, water the {plant} twice a day.",
            "My morning routine: coffee, ten minutes of {hobby}, then email.",
            "Every {weekday} night I plan the meals for the week, then order groceries.",
            "When a week goes badly, I write down three wins, then spend an hour on {hobby}.",
            "The trick with {hobby} is to start slow and add a little every week.",
            "log: automation created: when I leave home, turn off the {appliance}",
            "log: rule added: if {rel} calls after 22:00, ring even in do-not-disturb",
            "If the {device} stops responding, unplug it for thirty seconds and plug it back in.",
            "To descale the kettle, boil water and vinegar, wait {mins} minutes, rinse twice.",
            "When the {appliance} beeps twice, clean the filter before the next run.",
            "If I'm stressed before a {event}, do box breathing: in for 4, hold 4, out 4, hold 4.",
            "Never schedule meetings before 10 on {weekday}s; push them to the afternoon.",
            "Whenever we fly to {city}, pack {med} in the carry-on, never in the checked bag.",
            "If {pet_name} won't eat for a day, call the vet.",
            "Before bed, set out the {hobby} gear so there's no excuse in the morning.",
            "When the {warning} light comes on, pull over and check the oil first.",
            "After every flight, I walk for {mins} minutes to shake off the stiffness.",
            "If someone offers me food at a party, ask whether it has {allergen} in it first.",
            "For {dish}, soak the beans overnight and cook them slowly on low heat.",
            "When the kids fight over the {toy}, separate them, then talk it through.",
            "If my inhaler doesn't help within {mins} minutes, use it again and call {name}.",
            "To back up the {gadget}: plug in the drive, open the app, wait for the check.",
            "My approach to {hobby}: warm up, practice the basics, then one hard thing.",
            "When I get home from {hobby}, stretch for ten minutes before showering.",
            "If the baby wakes up before 5, give her the bottle and put her back down.",
            "How I make cold brew: coarse grind, 1 to 8 with water, {mins} hours in the fridge.",
            "If {name} asks to borrow the car, say yes only on weekends.",
            "Whenever I finish a book, I write three sentences about it in my journal.",
            "If the smoke alarm chirps, replace the battery; it takes a 9-volt.",
            "To calm {pet_name} during fireworks, close the curtains and play soft music.",
            "If my blood pressure reads over {bp} twice in a row, call the doctor.",
            "{weekday} rule: laundry in the morning, no work email after {time}.",
            "First thing when I arrive in {city}: find a pharmacy near the hotel.",
            "To get {pet_name} into the carrier, put a treat at the back and wait, never push.",
        ),
    ),
    (
        "wrk",
        (W,),
        FILLS_PER_TEMPLATE,
        (
            "Remind me to {task} {future}.",
            "I need to {task} {future}.",
            "Don't let me forget to {task}.",
            "I already took my {med} today.",
            "Just {done}, so cross that off the list.",
            "log: alarm set for {time}",
            "log: reminder created: {task} at {time}",
            "log: timer started {mins}:00",
            "log: calendar event added: {appt} {future}",
            "log: medication dose taken: {drug} {dose} at {time}",
            "Add {item} to the shopping list.",
            "Still waiting for {name} to send the {doc} back.",
            "Cancel the reminder to {task}.",
            "Move my {appt} to {weekday}.",
            "I'm heading to {place} now, back in {mins} minutes.",
            "Currently working on the {doc}, should be done {future}.",
            "Todo: {task}.",
            "Snooze the {appt} reminder for {mins} minutes.",
            "Set an alarm for {time} {future}.",
            "I've {done}; only {task} left for today.",
            "Can you remind {name} about the {event} {future}?",
            "Heading out for {hobby} with the kids now, talk later.",
            "Put the {appt} in my calendar for {future}.",
            "Ping me {future} to check on the {chore}.",
            "I still haven't {done}, need to do it {future}.",
            "log: reminder completed: {task}",
            "log: to-do added: {task}",
            "I'm in the middle of making {dish}, can't talk right now.",
            "Next up: {task}, then {task2}.",
            "Mark the {appt} as done.",
            "I'm waiting at the pharmacy for {med} right now.",
            "Text me when it's time to leave for the {appt}.",
            "I'm going to {task} after lunch.",
            "Pending: the {tradesperson} is coming {future}.",
            "Skip today's {hobby} reminder, my {bodypart} hurts.",
            "Please reschedule my call with {name} to {weekday}.",
            "Book a table for two at {time} on {weekday}.",
            "I skipped my {med} this morning, remind me again at noon.",
            "Remind me to {task} when I get home.",
            "I have to finish the {doc} before the meeting {future}.",
            "Can you check if {name} confirmed for dinner {future}?",
            "I've got a {appt} {future}, don't let me double-book.",
            "Just took my {med}, log it please.",
            "On my list for today: {task} and {task2}.",
            "log: shopping list: added {item}",
            "log: reminder snoozed: {task}, {mins} min",
            "Waiting on a callback from the {tradesperson}.",
            "I'm about to leave for the {appt}, back around {time}.",
            "Halfway through the {doc}, I'll finish it {future}.",
        ),
    ),
    # Bare acknowledgements sit far apart in embedding space (two words share little), so
    # each of these templates is filled many times to cover its small combinatorial space.
    (
        "ack",
        (F,),
        SHORT_FILLS,
        (
            "{ack}",
            "{ack} {emoji}",
            "{ack} {ack2}",
            "{ack} {thanks}",
            "{okay} {thanks}",
            "{thanks}!",
            "{ack}, {thanks} {emoji}",
        ),
    ),
    (
        "frg",
        (F,),
        FILLS_PER_TEMPLATE,
        (
            "{ack}, {name}",
            "{thanks}, {name} {emoji}",
            "{wow}!",
            "{wow}, that's {adj}!",
            "{wow}, {name}! That's {adj}!",
            "That's {adj}, {name}!",
            "{hi} {name}! Long time no chat, how are things?",
            "{hi}! What's up?",
            "{hi} {name}, how's it going?",
            "{q}",
            "{wow}! {q}",
            "That's {adj}, {name}! {q}",
            "Aww, that's {adj}. {q}",
            "{bye}, {name}!",
            "{bye}! {emoji}",
            "Haha yeah, {name}, {agree}.",
            "{agree}, {name}. Couldn't agree more.",
            "log: {noise}",
            "Thanks so much, {name}! You're the best.",
            "Thanks for asking, {name}!",
            "Thanks, {name}! Will do.",
            "Congrats, {name}!!",
            "You got this, {name}!",
            "Glad to hear that, {name}!",
            "Sounds {adj}, {name}!",
            "Sorry {name}, what did you mean?",
            "Oops, wrong chat {emoji}",
            "Hmm, let me think, {name}.",
            "{emoji}",
            "That makes sense, {name}.",
            "Keep it up, {name}!",
            "Nice pic, {name}, {adj}!",
            "Love that for you, {name} {emoji}",
            "Yeah I know right {emoji}",
            "Wait what? {emoji}",
            "brb",
            "Lol {name} you're {adj}",
            "So {adj} to hear from you, {name}!",
            "Omg {name} I can't even {emoji}",
            "Haha right?",
            "Hmm, not sure, {name}.",
            "Yeah, {agree}!",
            "Oh really? {q}",
            "Hey {name}, you there?",
            "{ack}. {q}",
            "Haha okay okay {emoji}",
            "So {adj}!!",
            "{hi} {name}! {q}",
        ),
    ),
    (
        "eps",
        (E, S),
        FILLS_PER_TEMPLATE,
        (
            "We visited my {rel} in {city} {past}; she's lived there since college.",
            "I ended up in the ER {past} because of my {allergen} allergy.",
            "The tests {past} confirmed I'm allergic to {allergen}.",
            "At {name}'s wedding {past} I realized how much I love dancing.",
            "I went {hobby} with my {rel} {past}; it's our favorite thing to do together.",
            "{past} we celebrated ten years since I moved to {city}, my home now.",
            "I got diagnosed with {condition} {past}.",
            "My {rel}, who is a {job}, helped me move {past}.",
            "I met my {rel}'s new partner {past}; turns out he's a {job} too.",
            "{past} I finally tried {food} and now I'm obsessed with it.",
        ),
    ),
    (
        "epw",
        (E, W),
        FILLS_PER_TEMPLATE,
        (
            "I saw the dentist {past} and I need to book a follow-up for next month.",
            "Picked up the prescription {past}; still have to call the insurance about it.",
            "The plumber came {past} but didn't finish, he's coming back {future}.",
            "I had my {appt} {past} and now I have to {task} {future}.",
            "We got back from {city} {past}, I still need to unpack and do laundry.",
            "The car failed inspection {past}, so I have to take it to the garage {future}.",
            "{name} lent me a book {past}, I have to give it back {future}.",
        ),
    ),
    (
        "spr",
        (S, P),
        FILLS_PER_TEMPLATE,
        (
            "I have {condition}, so whenever I eat out I check the menu with {name} first.",
            "Since I'm allergic to {allergen}, always check the labels before buying anything.",
            "I'm a light sleeper, so if I have an early flight to {city} I go to bed by nine.",
            "I have {condition}, so when I exercise I warm up for at least ten minutes.",
            "My {rel} is vegan, so when she visits, cook without butter or eggs.",
            "I get carsick, so on long drives I always sit in front and take a break every hour.",
            "I hate being late, so for every {appt} I leave {mins} minutes early.",
        ),
    ),
    (
        "pwk",
        (P, W),
        FILLS_PER_TEMPLATE,
        (
            "Remind me at {time} to take {med}, and if I skip it, remind me again an hour later.",
            "From now on, whenever I say 'done for the day', set an alarm for {time}.",
            "Set a reminder: if it's sunny {future}, water the {plant} before work.",
            "Add a rule and a reminder: every Monday at {time}, take out the recycling.",
            "If {name} hasn't replied by {future}, remind me to call her instead.",
            "Remind me {future} to {task}, and from now on do that every month.",
        ),
    ),
    (
        "swk",
        (S, W),
        FILLS_PER_TEMPLATE,
        (
            "I take {med} every morning and I'm almost out; order a refill today.",
            "My {rel} is allergic to {allergen}, remind me to tell the caterer {future}.",
            "I'm a {job} and I'm on call this weekend, so move the {appt} to {future}.",
            "{name} loves {food}; remind me to book that place for her birthday.",
        ),
    ),
    (
        "epp",
        (E, P),
        FILLS_PER_TEMPLATE,
        (
            "I fainted at the gym {past}; the doctor said: if I feel dizzy, sit down at once.",
            "We got lost near {city} {past}, so now the rule is: download the offline map first.",
            "My bike got stolen {past}; from now on I always use two locks.",
            "I overslept {past} and missed the {appt}, so now I set two alarms.",
        ),
    ),
)

SLOT = re.compile(r"\{(\w+?)\d*\}")
_TEST_SENTENCES = {
    # Kept out of the seed set: tests/test_router.py checks these on the trained head.
    "ok thanks",
    "i'm allergic to penicillin.",
    "remind me to call the dentist tomorrow at 9",
    "if it rains, take the bus instead of biking",
    "we went to the beach with the kids last saturday",
}


def fill(template: str, rng: random.Random) -> str:
    """Replace each ``{slot}`` with a random word from its vocabulary (openers expand too)."""
    text = SLOT.sub(lambda m: rng.choice(VOCAB[m.group(1)]), template)
    return SLOT.sub(lambda m: rng.choice(VOCAB[m.group(1)]), text)


_PROPER = {"I", *VOCAB["name"], *VOCAB["city"], *VOCAB["pet_name"], "Dr."}


def _lower_first(text: str) -> str:
    """Lower-case the first letter unless the first word is "I" or a proper noun."""
    first = re.split(r"[\s',;]", text, maxsplit=1)[0]
    return text if first in _PROPER else text[0].lower() + text[1:]


def dress(text: str, labels: tuple[str, ...], rng: random.Random) -> str:
    """Vary the surface like real chat: openers and closers on content turns, casual casing.

    Chatty wrappers go only on content-bearing turns, so the head learns that a friendly
    opener does not make a turn fragmented.
    """
    if F not in labels and not text.startswith("log:"):
        roll = rng.random()
        if roll < 0.25:
            text = fill(rng.choice(VOCAB["opener"]), rng) + _lower_first(text)
        elif roll < 0.4:
            text = text + fill(rng.choice(VOCAB["closer"]), rng)
    if rng.random() < 0.2:
        text = text.lower().rstrip(".")
    return text


def normalise(text: str) -> str:
    """The key two texts collide on: case-folded, trailing full stops and spaces dropped.

    The encoder's tokenizer is uncased and ``dress`` lower-cases a line and drops its final
    full stop, so "I'm a nurse." and "i'm a nurse" embed (almost) alike: for ``--exclude`` they
    are the same line.
    """
    return text.casefold().rstrip(" .")


def generate(
    rng_seed: int = SEED,
    fills_per_template: int = FILLS_PER_TEMPLATE,
    exclude: frozenset[str] = frozenset(),
) -> list[dict[str, object]]:
    """All records, in template order; duplicates within a group are dropped.

    Args:
        rng_seed: seeds the slot filling and dressing (the seed set uses ``SEED``).
        fills_per_template: lines per ordinary template; the short acknowledgement templates
            get ``SHORT_FILLS / FILLS_PER_TEMPLATE`` times as many. A template with few slot
            values yields only the distinct texts it finds in ``ATTEMPTS_PER_FILL`` tries each.
        exclude: :func:`normalise`-d texts never to write (another set's lines).
    """
    rng = random.Random(rng_seed)
    scale = fills_per_template / FILLS_PER_TEMPLATE
    records: list[dict[str, object]] = []
    seen: set[str] = set()
    for prefix, labels, base_fills, templates in TEMPLATES:
        fills = max(1, round(base_fills * scale))
        for index, template in enumerate(templates):
            group = f"{prefix}-{index:02d}"
            kept = 0
            for _ in range(fills * ATTEMPTS_PER_FILL):
                text = dress(fill(template, rng), labels, rng)
                if text in seen or text.lower() in _TEST_SENTENCES:
                    continue
                if exclude and normalise(text) in exclude:
                    continue
                seen.add(text)
                records.append({"text": text, "labels": list(labels), "group": group})
                kept += 1
                if kept == fills:
                    break
    return records


def read_texts(path: Path) -> frozenset[str]:
    """:func:`normalise`-d texts of a JSONL file with a ``text`` key per line."""
    texts = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            texts.add(normalise(json.loads(line)["text"]))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SystemExit(f"{path}:{number}: not a JSON object with a text ({exc})") from exc
    return frozenset(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the synthetic router seed set.")
    parser.add_argument("--out", type=Path, default=Path("models/router_seed.jsonl"))
    parser.add_argument(
        "--rng-seed", type=int, default=SEED, help=f"random seed (default {SEED}, the seed set's)"
    )
    parser.add_argument(
        "--fills",
        type=int,
        default=FILLS_PER_TEMPLATE,
        help=f"lines per template (default {FILLS_PER_TEMPLATE}; acknowledgement templates get "
        f"{SHORT_FILLS}/{FILLS_PER_TEMPLATE} as many)",
    )
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="JSONL file whose texts are left out (case and final full stop ignored); repeatable",
    )
    args = parser.parse_args(argv)
    if args.fills < 1:
        parser.error("--fills must be >= 1")
    exclude = frozenset().union(*(read_texts(path) for path in args.exclude))
    records = generate(args.rng_seed, args.fills, exclude)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    counts = {label: sum(label in r["labels"] for r in records) for label in (E, S, P, W, F)}
    groups = len({r["group"] for r in records})
    print(f"wrote {len(records)} lines ({groups} templates) to {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

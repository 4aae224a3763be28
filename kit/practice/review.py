"""Spaced-repetition review of the discussion questions, scheduled by the `fsrs` package.

One card per discussion question (`<exercise>/<question id>`). A card is "new" until the user
reviews it. Two things review cards:
- the user, in `attn-kit discuss` (again / hard / good / easy) or a mock's discussion
  (self-scored key points);
- the kit, after a check run, within these rules (the README states them):
  * only a full graded run whose failure the diagnosis names as a known bug rates, and only
    that bug's concept (no-scaling -> scaling), as Again;
  * only cards the user has already reviewed: new cards are introduced by the user;
  * at most one automatic rating per card in any 24 hours, however often the file is re-run;
  * stubs, files that do not load and timeouts never get a diagnosis, so they never rate;
  * a fix does not rate (passing a check is not recalling the answer to a question).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from fsrs import Card, Rating, Scheduler

from attn_kit.load import catalog
from attn_kit.practice.store import Store, now, parse_time

RATINGS = {
    "1": Rating.Again,
    "2": Rating.Hard,
    "3": Rating.Good,
    "4": Rating.Easy,
    "again": Rating.Again,
    "hard": Rating.Hard,
    "good": Rating.Good,
    "easy": Rating.Easy,
    "a": Rating.Again,
    "h": Rating.Hard,
    "g": Rating.Good,
    "e": Rating.Easy,
}


AUTOMATIC = "check"  # the source of the kit's own ratings
AUTOMATIC_GAP = timedelta(days=1)  # at most one automatic rating per card in this window


def scheduler() -> Scheduler:
    return Scheduler()


def card_key(exercise_id: str, question_id: str) -> str:
    return f"{exercise_id}/{question_id}"


@dataclass
class Entry:
    """One question in a review queue, with its card (None while it is new)."""

    exercise: catalog.Exercise
    question: catalog.Question
    card: Card | None
    new: bool = False  # the user has never reviewed it (the kit may have)

    @property
    def key(self) -> str:
        return card_key(self.exercise.id, self.question.id)

    @property
    def is_new(self) -> bool:
        return self.card is None or self.new


def questions(exercise_id: str | None = None) -> list[tuple[catalog.Exercise, catalog.Question]]:
    chosen = [catalog.exercise(exercise_id)] if exercise_id else list(catalog.exercises().values())
    return [(e, q) for e in chosen for q in e.questions]


def load_card(row: dict) -> Card:
    return Card.from_json(row["card"])


def review(
    store: Store, exercise_id: str, question: catalog.Question, rating: Rating, source: str = "discuss", at: datetime | None = None
) -> Card:
    """Review one card with fsrs and save its new state and log in one transaction."""
    at = at or now()
    key = card_key(exercise_id, question.id)
    with store.transaction():
        row = store.card(key)
        card = load_card(row) if row else Card(card_id=zlib.crc32(key.encode()), due=at)
        card, log = scheduler().review_card(card, rating, review_datetime=at)
        store.save_review(
            key=key,
            exercise=exercise_id,
            question=question.id,
            concept=question.concept,
            card_json=card.to_json(),
            due=card.due,
            rating=int(rating),
            source=source,
            log_json=log.to_json(),
            at=at,
        )
    return card


def queue(
    store: Store, exercise_id: str | None = None, due_only: bool = False, new: int = 5, at: datetime | None = None, first: str | None = None
) -> list[Entry]:
    """Cards due now (most overdue first), then up to `new` questions the user never reviewed
    (a card only the kit has rated is still new to the user). With `first`, that exercise's
    cards come before the others in both groups."""
    at = at or now()
    rows = {row["key"]: row for row in store.cards(exercise_id)}
    seen = store.user_reviewed_keys()
    due, fresh = [], []
    for exercise, question in questions(exercise_id):
        key = card_key(exercise.id, question.id)
        row = rows.get(key)
        if key not in seen:
            fresh.append(Entry(exercise, question, load_card(row) if row else None, new=True))
        elif row is not None and parse_time(row["due"]) <= at:  # a reviewed card has a row
            due.append(Entry(exercise, question, load_card(row)))
    due.sort(key=lambda e: (e.exercise.id != first, cast(Card, e.card).due))  # due entries have cards
    fresh.sort(key=lambda e: e.exercise.id != first)  # stable: catalogue order otherwise
    return due if due_only else due + fresh[: max(new, 0)]


@dataclass(frozen=True)
class Outlook:
    due_now: int
    due_tomorrow: int  # due within the next 24 hours, those due now included
    due_week: int  # due within the next 7 days, those due now included
    new: int  # questions never reviewed
    total: int


def outlook(store: Store, exercise_id: str | None = None, at: datetime | None = None) -> Outlook:
    """Counts at `at`, true when printed: due among the cards the user has reviewed; new = never
    reviewed by the user."""
    at = at or now()
    rows = {row["key"]: row for row in store.cards(exercise_id)}
    seen = store.user_reviewed_keys()
    all_keys = [card_key(e.id, q.id) for e, q in questions(exercise_id)]
    dues = [parse_time(rows[k]["due"]) for k in all_keys if k in rows and k in seen]
    return Outlook(
        due_now=sum(d <= at for d in dues),
        due_tomorrow=sum(d <= at + timedelta(days=1) for d in dues),
        due_week=sum(d <= at + timedelta(days=7) for d in dues),
        new=sum(k not in seen for k in all_keys),
        total=len(all_keys),
    )


def concept_questions(exercise_id: str, concept: str) -> list[tuple[str, catalog.Question]]:
    """The cards a concept stands for: this exercise's questions on it, else any exercise's."""
    own = [(exercise_id, q) for q in catalog.exercise(exercise_id).questions if q.concept == concept]
    if own:
        return own
    return [(e.id, q) for e, q in questions() if q.concept == concept]


@dataclass(frozen=True)
class AutoRating:
    concept: str
    key: str
    rating: Rating
    due: datetime


def rate_concepts(store: Store, exercise_id: str, bugs: list[str], at: datetime | None = None) -> list[AutoRating]:
    """The kit's own ratings after a graded run whose diagnosis named `bugs`: each bug's concept's
    cards that the user has reviewed before, and that the kit has not rated in the last 24 hours,
    are reviewed as Again. Returns what was rated, with each card's new due time."""
    at = at or now()
    known = catalog.bugs()
    concepts = sorted({known[b].concept for b in bugs if b in known and known[b].concept})
    seen = store.user_reviewed_keys()
    done: list[AutoRating] = []
    with store.transaction():
        for concept in concepts:
            for owner, question in concept_questions(exercise_id, concept):
                key = card_key(owner, question.id)
                if key not in seen:
                    continue  # new cards are the user's to introduce
                last = store.last_review_at(key, AUTOMATIC)
                if last is not None and at - last < AUTOMATIC_GAP:
                    continue
                card = review(store, owner, question, Rating.Again, source=AUTOMATIC, at=at)
                done.append(AutoRating(concept, key, Rating.Again, card.due))
    return done


def due_counts_by_exercise(store: Store, at: datetime | None = None) -> dict[str, int]:
    at = at or now()
    seen = store.user_reviewed_keys()
    counts: dict[str, int] = {}
    for row in store.cards():
        if row["key"] in seen and parse_time(row["due"]) <= at:
            counts[row["exercise"]] = counts.get(row["exercise"], 0) + 1
    return counts

"""Spaced-repetition review of the discussion questions, scheduled by the `fsrs` package.

One card per discussion question (`<exercise>/<question id>`). A card has no row in the store
until its first review; until then it is "new". Two things review cards:
- the user, in `attn-kit discuss` (again / hard / good / easy);
- the kit, after a check run: when a run starts failing on a concept (masking, scaling, ...),
  that concept's cards are reviewed as Again; when a concept that was failing passes again,
  as Good. Only the transitions count, so re-running a still-broken file on every save does
  not pile up reviews.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from fsrs import Card, Rating, Scheduler

from . import catalog
from .store import Store, now, parse_time

RATINGS = {"1": Rating.Again, "2": Rating.Hard, "3": Rating.Good, "4": Rating.Easy,
           "again": Rating.Again, "hard": Rating.Hard, "good": Rating.Good, "easy": Rating.Easy,
           "a": Rating.Again, "h": Rating.Hard, "g": Rating.Good, "e": Rating.Easy}


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

    @property
    def key(self) -> str:
        return card_key(self.exercise.id, self.question.id)

    @property
    def is_new(self) -> bool:
        return self.card is None


def questions(exercise_id: str | None = None) -> list[tuple[catalog.Exercise, catalog.Question]]:
    chosen = [catalog.exercise(exercise_id)] if exercise_id else list(catalog.exercises().values())
    return [(e, q) for e in chosen for q in e.questions]


def load_card(row: dict) -> Card:
    return Card.from_json(row["card"])


def review(store: Store, exercise_id: str, question: catalog.Question, rating: Rating,
           source: str = "discuss", at: datetime | None = None) -> Card:
    """Review one card with fsrs and save its new state and log in one transaction."""
    at = at or now()
    key = card_key(exercise_id, question.id)
    with store.transaction():
        row = store.card(key)
        card = load_card(row) if row else Card(card_id=zlib.crc32(key.encode()), due=at)
        card, log = scheduler().review_card(card, rating, review_datetime=at)
        store.save_review(key=key, exercise=exercise_id, question=question.id, concept=question.concept,
                          card_json=card.to_json(), due=card.due, rating=int(rating), source=source,
                          log_json=log.to_json(), at=at)
    return card


def queue(store: Store, exercise_id: str | None = None, due_only: bool = False, new: int = 5,
          at: datetime | None = None) -> list[Entry]:
    """Cards due now (most overdue first), then up to `new` never-reviewed questions."""
    at = at or now()
    rows = {row["key"]: row for row in store.cards(exercise_id)}
    due, fresh = [], []
    for exercise, question in questions(exercise_id):
        row = rows.get(card_key(exercise.id, question.id))
        if row is None:
            fresh.append(Entry(exercise, question, None))
        elif parse_time(row["due"]) <= at:
            due.append(Entry(exercise, question, load_card(row)))
    due.sort(key=lambda e: e.card.due)
    return due if due_only else due + fresh[:max(new, 0)]


@dataclass(frozen=True)
class Outlook:
    due_now: int
    due_tomorrow: int        # due within the next 24 hours, those due now included
    due_week: int            # due within the next 7 days, those due now included
    new: int                 # questions never reviewed
    total: int


def outlook(store: Store, exercise_id: str | None = None, at: datetime | None = None) -> Outlook:
    at = at or now()
    rows = {row["key"]: row for row in store.cards(exercise_id)}
    all_keys = [card_key(e.id, q.id) for e, q in questions(exercise_id)]
    dues = [parse_time(rows[k]["due"]) for k in all_keys if k in rows]
    return Outlook(due_now=sum(d <= at for d in dues),
                   due_tomorrow=sum(d <= at + timedelta(days=1) for d in dues),
                   due_week=sum(d <= at + timedelta(days=7) for d in dues),
                   new=sum(k not in rows for k in all_keys), total=len(all_keys))


def concept_questions(exercise_id: str, concept: str) -> list[tuple[str, catalog.Question]]:
    """The cards a concept stands for: this exercise's questions on it, else any exercise's."""
    own = [(exercise_id, q) for q in catalog.exercise(exercise_id).questions if q.concept == concept]
    if own:
        return own
    return [(e.id, q) for e, q in questions() if q.concept == concept]


def rate_concepts(store: Store, exercise_id: str, tested: set[str], failing: set[str],
                  at: datetime | None = None) -> list[tuple[str, str, Rating]]:
    """The kit's own ratings after a check run; returns (concept, card key, rating) for each review.

    A concept that fails now and was not failing before -> Again; one that was failing and
    passes now -> Good. Concepts the run did not test are left alone."""
    at = at or now()
    done: list[tuple[str, str, Rating]] = []
    with store.transaction():
        for concept in sorted(tested | failing):
            was_failing = store.concept_failing(exercise_id, concept)
            is_failing = concept in failing
            if is_failing and not was_failing:
                rating = Rating.Again
            elif was_failing and not is_failing:
                rating = Rating.Good
            else:
                continue
            store.set_concept(exercise_id, concept, is_failing, at)
            for owner, question in concept_questions(exercise_id, concept):
                review(store, owner, question, rating, source="check", at=at)
                done.append((concept, card_key(owner, question.id), rating))
    return done


def due_counts_by_exercise(store: Store, at: datetime | None = None) -> dict[str, int]:
    at = at or now()
    counts: dict[str, int] = {}
    for row in store.cards():
        if parse_time(row["due"]) <= at:
            counts[row["exercise"]] = counts.get(row["exercise"], 0) + 1
    return counts

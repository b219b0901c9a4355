"""MovieLens-100k ratings as click-through samples, for `pipe_command` and for evaluation.

    python reader.py --data_dir ml-100k < u.data-lines > multislot-lines

A rating line `user<TAB>item<TAB>rating<TAB>time` joins the user (u.user) and item (u.item)
tables into the slots SLOTS, all ids of one shared id space (each slot has its own range, so
one embedding table serves all), and label = rating >= 4:

    user, item, genres (1-6 ids: the item's genres), occupation, gender, age (bucket),
    zip (first digit of the zip code; one id for codes that do not start with a digit), label
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Iterator

# Where each slot's ids start in the shared id space, and how many it may use.
OFFSETS = {
    "user": 0,
    "item": 1_000,
    "genres": 3_000,
    "occupation": 3_100,
    "gender": 3_200,
    "age": 3_300,
    "zip": 3_400,
}
VOCAB_SIZE = 3_500
ID_SLOTS = tuple(OFFSETS)
SLOTS = (*ID_SLOTS, "label")
AGE_EDGES = (18, 25, 35, 45, 50, 56)  # MovieLens-1M's age groups
NUM_GENRES = 19
POSITIVE_RATING = 4


class Tables:
    """The user and item side tables of ml-100k, as ids of the shared space."""

    def __init__(self, data_dir: str) -> None:
        self.users: dict[int, list[tuple[str, int]]] = {}
        self.items: dict[int, list[int]] = {}
        occupations: dict[str, int] = {}
        with open(os.path.join(data_dir, "u.user"), encoding="latin-1") as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip("\n").split("|")
                if len(fields) != 5:
                    raise ValueError(f"u.user:{number}: expected 5 '|'-separated fields")
                user, age, gender, occupation, zipcode = fields
                occupation_id = occupations.setdefault(occupation, len(occupations))
                age_bucket = sum(int(age) >= edge for edge in AGE_EDGES)
                zip_id = int(zipcode[0]) if zipcode[:1].isdigit() else 10
                self.users[int(user)] = [
                    ("occupation", OFFSETS["occupation"] + occupation_id),
                    ("gender", OFFSETS["gender"] + (gender == "F")),
                    ("age", OFFSETS["age"] + age_bucket),
                    ("zip", OFFSETS["zip"] + zip_id),
                ]
        with open(os.path.join(data_dir, "u.item"), encoding="latin-1") as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip("\n").split("|")
                if len(fields) != 5 + NUM_GENRES:
                    raise ValueError(f"u.item:{number}: expected {5 + NUM_GENRES} fields")
                genres = [OFFSETS["genres"] + g for g, flag in enumerate(fields[5:]) if flag == "1"]
                # Genre 0 is "unknown": an item without flags gets it, so no slot is empty.
                self.items[int(fields[0])] = genres or [OFFSETS["genres"]]

    def sample(self, line: str) -> list[tuple[str, list[int]]]:
        """The slots of one rating line; ValueError names what is wrong."""
        fields = line.split("\t")
        if len(fields) != 4:
            raise ValueError(f"expected 4 TAB-separated fields, got {len(fields)}")
        user, item, rating = int(fields[0]), int(fields[1]), int(fields[2])
        if user not in self.users:
            raise ValueError(f"user {user} is not in u.user")
        if item not in self.items:
            raise ValueError(f"item {item} is not in u.item")
        sample = [
            ("user", [OFFSETS["user"] + user]),
            ("item", [OFFSETS["item"] + item]),
            ("genres", self.items[item]),
        ]
        sample += [(name, [value]) for name, value in self.users[user]]
        sample.append(("label", [int(rating >= POSITIVE_RATING)]))
        return sample


def read_samples(path: str, tables: Tables) -> Iterator[list[tuple[str, list[int]]]]:
    with open(path, encoding="ascii") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield tables.sample(line.rstrip("\n"))
                except ValueError as e:
                    raise ValueError(f"{path}:{number}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="pipe_command reader: MovieLens rating lines on stdin, MultiSlot lines "
        f"({', '.join(SLOTS)}) on stdout."
    )
    parser.add_argument("--data_dir", required=True, help="folder with u.user and u.item")
    args = parser.parse_args(argv)
    from fleet.data_generator import MultiSlotDataGenerator

    tables = Tables(args.data_dir)

    class Reader(MultiSlotDataGenerator):
        line_number = 0

        def generate_sample(self, line: str):  # noqa: ANN202
            self.line_number += 1
            if not line.strip():
                return []
            try:
                return [tables.sample(line.rstrip("\n"))]
            except ValueError as e:
                raise ValueError(f"line {self.line_number} of the input: {e}") from None

    try:
        Reader().run_from_stdin()
    except ValueError as e:
        print(f"movielens reader: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build the ImpliRet world-knowledge reference KB (run once; its output, landmarks_kb.jsonl, is committed).

One passage per landmark behind ImpliRet's world-knowledge hints, written from its Wikidata facts: label, type
(instance of), place (location, administrative entity, city) and country. gapbench reads only the output file.

    python tasks/data/argus_kb/build_kb.py [/path/to/impliret_wknow_landmarks_wikidata.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gapbench.files import write_text_atomic

OUT = Path(__file__).with_name("landmarks_kb.jsonl")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def passage(row: dict) -> dict:
    label = row["itemLabel"].strip()
    types = [t.strip() for t in row.get("instanceOf") or [] if t.strip()]
    kind = " and ".join(types[:2]) if types else "landmark"
    places: list[str] = []
    for key in ("streetNameLabel", "locationLabel", "cityLabel", "adminEntityLabel"):
        value = (row.get(key) or "").strip()
        if value and value not in places and value != label and value != row["countryLabel"]:
            places.append(value)
    country = row["countryLabel"].strip()
    where = ", ".join([*places, country])
    text = f"{label} is {_article(kind)} {kind} in {where}. It is located in the country {country}."
    return {"id": row["itemQ"], "title": label, "text": text, "country": country,
            "wikidata": {"item": row["itemQ"], "country": row.get("countryQ", "")}}


def main(src: str) -> None:
    rows = [json.loads(line) for line in Path(src).read_text(encoding="utf-8").splitlines() if line.strip()]
    seen: set[str] = set()
    out = []
    for row in rows:
        if row["itemQ"] in seen:
            continue
        seen.add(row["itemQ"])
        out.append(passage(row))
    write_text_atomic(OUT, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in out))
    print(f"wrote {len(out)} passages to {OUT}")


if __name__ == "__main__":
    # default: the vendored copy of the landmarks' Wikidata facts (tasks/data/argus/, with its provenance)
    default = Path(__file__).parents[1] / "argus" / "impliret_wknow_landmarks_wikidata.jsonl"
    main(sys.argv[1] if len(sys.argv) > 1 else str(default))

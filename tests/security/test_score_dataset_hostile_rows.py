"""``score_dataset`` is handed a dataset whose completion column holds every kind of value a
pipeline can hand over (see row_attacks.py), in one Ray Data block (Arrow keeps them as Python
objects), and a dataset of bytes: each row gets its own verdict beside its own id; a value that
is no completion gets no verdict and says why; the batch never fails; the answer that never
ends is a 0 within its own limit."""

import ray
from row_attacks import ENV, PROVIDER, RIGHT, ROWS, check_row, row_attack  # noqa: F401

TAGS = ("ray-data", "plain-data", "time", "output")


def _scored(config, rows):
    from deepgym_ray.integrations.ray_data import score_dataset

    ds = ray.data.from_items(rows, override_num_blocks=1)
    scored = score_dataset(ds, ENV, config=config, details=True, batch_size=64)
    return {row["n"]: row for row in scored.take_all()}


@row_attack
def test_every_row_gets_its_own_verdict(session_pool_local):
    config = session_pool_local.config
    back = _scored(config, [{"n": i, "completion": value} for i, (_, value, _) in enumerate(ROWS)])
    assert sorted(back) == list(range(len(ROWS)))
    for i, (name, _, want) in enumerate(ROWS):
        row = back[i]
        check_row(name, want, row["reward"], row["has_verdict"], row["error_type"],
                  row["details"])

    # A column of bytes (raw files read as binary): every row is told to decode first.
    back = _scored(config, [{"n": i, "completion": RIGHT.encode()} for i in range(3)])
    for row in back.values():
        check_row("bytes", None, row["reward"], row["has_verdict"], row["error_type"],
                  row["details"])
        assert "decode it first" in row["details"], row

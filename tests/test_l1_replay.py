"""tools/l1_replay.py's L1 (the evidence of docs/MODEL_NOTES.md's section on the convolutions'
L2 bytes): LRU over 128-byte lines whose 32-byte sectors fill on demand, warps interleaved
request by request."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("l1_replay", ROOT / "tools" / "l1_replay.py")
l1_replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(l1_replay)


def test_warps_in_step_share_what_l1_holds():
    # two warps of one block read the same sector in the same step: one miss between them
    asked, missed = l1_replay.replay([[{0}], [{0}]], tpb=64, blocks=1, capacity_bytes=1024, stagger=False)
    assert (asked, missed) == (2, 1)


def test_sectors_fill_on_demand_and_lines_are_evicted_least_recent_first():
    # sectors 0 and 1 share line 0: each misses once, a re-read hits
    assert l1_replay.replay([[{0}, {1}, {0, 1}]], tpb=32, blocks=1, capacity_bytes=128, stagger=False) == (4, 2)
    # one line of L1, two lines read in turn: every read misses
    assert l1_replay.replay([[{0}, {4}, {0}, {4}]], tpb=32, blocks=1, capacity_bytes=128, stagger=False) == (4, 4)
    # stores (None) neither hit nor allocate
    assert l1_replay.replay([[None, {0}, None, {0}]], tpb=32, blocks=1, capacity_bytes=128, stagger=False) == (2, 1)


def test_staggered_blocks_read_shared_data_out_of_phase():
    # two one-warp blocks read the same 4 lines in order; in step they share each line, spread
    # half a life apart through a one-line L1 they do not
    s = [[{0}, {4}, {8}, {12}], [{0}, {4}, {8}, {12}]]
    assert l1_replay.replay(s, tpb=32, blocks=2, capacity_bytes=128, stagger=False) == (8, 4)
    assert l1_replay.replay(s, tpb=32, blocks=2, capacity_bytes=128, stagger=True) == (8, 8)

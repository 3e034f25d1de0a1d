"""TCPStore / FileStore / HashStore / PrefixStore against torch.distributed's stores: the same
sequence of calls gives the same answers."""
import datetime
import threading
import time

import pytest
import torch.distributed as tdist

import ember.distributed as dist

T1 = datetime.timedelta(seconds=1)


def script(s):
    """The answers of one store to a fixed sequence of calls."""
    out = []
    s.set("a", "x")
    s.set("b", b"\x00\xff")
    out += [s.get("a"), s.get("b"), s.add("n", 2), s.add("n", 5), s.get("n")]
    out.append(s.compare_set("a", "x", "y"))       # matches: set
    out.append(s.compare_set("a", "nope", "z"))    # no match: current value
    out.append(s.compare_set("new", "", "v"))      # missing + empty expected: set
    out.append(s.compare_set("new2", "e", "v"))    # missing: expected back
    out += [s.check(["a", "n"]), s.check(["a", "zz"]), s.get("a"), s.get("new")]
    out.append(s.delete_key("a"))
    out.append(s.check(["a"]))
    return out


def ember_stores(tmp_path):
    m = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=T1)
    return {"tcp": m, "file": dist.FileStore(str(tmp_path / "f"), 1, timeout=T1),
            "hash": dist.HashStore(timeout=T1),
            "prefix": dist.PrefixStore("p", dist.HashStore(timeout=T1))}


def test_answers_match_torch(tmp_path):
    ref = script(tdist.HashStore())
    for name, s in ember_stores(tmp_path).items():
        assert script(s) == ref, name


@pytest.mark.parametrize("kind", ["tcp", "file"])
def test_two_clients_share_keys_and_get_blocks(tmp_path, kind):
    if kind == "tcp":
        a = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, timeout=T1 * 10,
                          wait_for_workers=False)
        b = dist.TCPStore("127.0.0.1", a.port, 2, is_master=False, timeout=T1 * 10,
                          wait_for_workers=False)
    else:
        a = dist.FileStore(str(tmp_path / "f"), 2, timeout=T1 * 10)
        b = dist.FileStore(str(tmp_path / "f"), 2, timeout=T1 * 10)
    threading.Thread(target=lambda: (time.sleep(0.2), b.set("late", "v"))).start()
    assert a.get("late") == b"v"  # blocked until the other client set it
    assert [a.add("c", 1), b.add("c", 1), a.add("c", 1)] == [1, 2, 3]
    b.wait(["late", "c"])
    assert a.num_keys() == b.num_keys()


@pytest.mark.parametrize("kind", ["tcp", "file", "hash"])
def test_wait_and_get_time_out(tmp_path, kind):
    s = ember_stores(tmp_path)[kind]
    with pytest.raises(dist.DistStoreError, match="missing"):
        s.wait(["missing"], datetime.timedelta(seconds=0.3))
    with pytest.raises(dist.DistStoreError):
        s.get("missing")  # the store's own timeout: 1 s


def test_tcp_store_waits_for_workers():
    a = {}
    m = threading.Thread(target=lambda: a.setdefault(
        "m", dist.TCPStore("127.0.0.1", 29871, 2, is_master=True, timeout=T1 * 10)))
    m.start()
    c = dist.TCPStore("127.0.0.1", 29871, 2, is_master=False, timeout=T1 * 10)
    m.join(10)
    assert "m" in a and c.get("__ember_store_workers") == b"2"
    a["m"].close()

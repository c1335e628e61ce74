"""posenc_lib.counting: the recorders appendix 10 counts calls, operators and bytes with."""
import torch

from posenc_lib.counting import RecordCalls, RecordOps, entries_and_bytes, total_bytes


def test_views_count_the_values_they_show_once():
    x = torch.zeros(8, 6)  # 48 float32 values, 192 bytes
    assert entries_and_bytes([x.expand(3, 8, 6), x[:, ::2]]) == [(144, 192), (24, 96)]


def test_one_python_call_can_be_several_operators():
    ones = torch.ones(4, 8)
    with RecordCalls() as calls, RecordOps() as ops:
        torch.nn.functional.normalize(ones, dim=-1)
    assert [c.name for c in calls.calls] == ["normalize"] and len(ops.ops) > 1


def test_a_pass_reads_and_writes_once_in_place_or_not():
    y = torch.ones(8, 1024)  # 32 KiB
    for fn in (lambda: y * 1.5, lambda: y.mul_(1.5)):
        with RecordOps() as rec:
            fn()
        assert total_bytes(rec.ops) == 2 * 32 * 1024
    with RecordOps() as rec:
        y.mul_(1.5).add_(1)
    assert total_bytes(rec.ops) == 4 * 32 * 1024


def test_calls_copy_reads_its_source_and_a_no_op_moves_nothing():
    dst, src = torch.zeros(4, 4), torch.ones(4, 4, dtype=torch.float64)
    with RecordCalls() as rec:
        dst.copy_(src)
        dst.float()  # already float32: hands dst back
    (copy, same) = rec.calls
    assert copy.read == [(16, 128)] and copy.written == [(16, 64)]
    assert same.read == [] and same.written == [] and copy.size == 16


def test_operators_skip_views_and_allocations_and_see_the_backward():
    x = torch.ones(16, requires_grad=True)
    with RecordOps() as rec:
        (x * 2).sum().backward()
    names = [op.name for op in rec.ops]
    assert "aten::mul.Tensor" in names and "aten::sum" in names and len(names) > 2  # the backward's operators too
    assert not any(n.startswith("aten::empty") or n in ("aten::view", "aten::expand") for n in names)


def test_bounds_counts_in_one_pass_bounds_of_x():
    from posenc_lib.counting import bounds, record

    x, table = torch.ones(8, 1024), torch.ones(1024)  # a table with 1/8 of x's entries
    assert bounds(record(lambda: x * 1.5), x) == (1, 1.0)  # the unit
    ops = record(lambda: x * table)  # reads x and the table, writes an x-sized result
    assert bounds(ops, x) == (1, 1 + 1 / 16) and bounds(ops, x, x_sized_only=True) == (1, 1.0)
    assert bounds(record(lambda: table * 2), x, x_sized_only=True) == (0, 0.0)  # no pass over x


def test_bounds_charges_no_view_and_no_read_of_a_copys_destination():
    from posenc_lib.counting import bounds, record

    x, dst = torch.ones(8, 64), torch.zeros(8, 64, dtype=torch.float64)
    assert bounds(record(lambda: x.t().reshape(512)), x) == (1, 1.0)  # a copy (clone), its _unsafe_view not charged
    assert bounds(record(lambda: dst.copy_(x)), x) == (1, 1.5)  # x read (4 bytes an entry), dst written (8)

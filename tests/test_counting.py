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


def test_record_moves_keeps_calls_by_what_they_do():
    from posenc_lib.counting import RecordMoves

    x = torch.ones(8, 4)
    with RecordMoves() as rec:
        x.view(4, 8)  # a view: same memory, moves nothing
        torch.empty(8, 4)  # memory, no data
        x.mul_(2)  # in place
        x * 3  # fills new memory
    assert [call.name for call in rec.calls] == ["view", "empty", "mul_", "mul"]
    assert [call.name for call in rec.moving] == ["mul_", "mul"]  # the view and the allocation move no data

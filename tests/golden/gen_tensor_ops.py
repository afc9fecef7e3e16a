"""Golden cases for the ops written once over every backend as free functions
(kiln/tensor/rearrange.hpp, kiln/tensor/linalg.hpp): movedim, squeeze, repeat_interleave,
diagonal, diag, trace, outer, cross. New cases go at the end of cases()."""
import torch


def cases(w):
    x = torch.randn(2, 3, 4)
    w.case("movedim", x=x, one=torch.movedim(x, 0, 2), back=torch.movedim(x, -1, 0),
           two=torch.movedim(x, [0, 1], [2, 0]))

    s = torch.randn(1, 3, 1, 4)
    w.case("squeeze", x=s, out=torch.squeeze(s), ones=torch.ones(1, 1, 1), ones_out=torch.ones(1))

    r = torch.randn(2, 3)
    w.case("repeat_interleave", x=r, rows=torch.repeat_interleave(r, 2, 0), cols=torch.repeat_interleave(r, 3, -1),
           flat=torch.repeat_interleave(r, 2), none=torch.repeat_interleave(r, 0, 1))
    ri = torch.randint(-9, 9, (2, 3))
    w.case("repeat_interleave_int", x=ri, out=torch.repeat_interleave(ri, 2, 1))

    d = torch.randn(2, 3, 4)
    w.case("diagonal", x=d, main=torch.diagonal(d), last=torch.diagonal(d, 0, 1, 2),
           above=torch.diagonal(d, 1, -1, -2), below=torch.diagonal(d, -1, 1, 2),
           outside=torch.diagonal(d, 5, 1, 2), swapped=torch.diagonal(d, 2, 2, 0))
    m = torch.randn(3, 5)
    v = torch.randn(3)
    w.case("diag", m=m, main=torch.diag(m), above=torch.diag(m, 2), below=torch.diag(m, -1),
           v=v, square=torch.diag(v), square_above=torch.diag(v, 1), square_below=torch.diag(v, -2),
           trace=torch.trace(m).reshape(1))
    mi = torch.randint(-9, 9, (4, 4))
    w.case("diag_int", m=mi, main=torch.diag(mi), trace=torch.trace(mi).reshape(1), square=torch.diag(mi[0], -1))

    a, b = torch.randn(4), torch.randn(3)
    w.case("outer", a=a, b=b, out=torch.outer(a, b))

    c1, c2 = torch.randn(4, 3), torch.randn(4, 3)
    c3, c4 = torch.randn(3, 2, 5), torch.randn(3, 1, 5)
    w.case("cross", a=c1, b=c2, last=torch.linalg.cross(c1, c2),
           a3=c3, b3=c4, first=torch.linalg.cross(c3, c4, dim=0))

    # ---- order statistics and sorted search (kiln/tensor/order.hpp)
    nan = float("nan")
    cm = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, nan, 1.0, nan, 5.0],
                       [2.0, 2.0, 1.0, 1.0, 4.0, 0.0, 0.0, 4.0, -1.0]])
    cmr = torch.randn(3, 4, 2)
    cmi = torch.tensor([[4, 1, 4, 1, 7, 0], [0, 0, -3, 5, -3, 5]])
    w.case("cummax", x=cm, max_values=torch.cummax(cm, 1).values, max_indices=torch.cummax(cm, 1).indices,
           min_values=torch.cummin(cm, 1).values, min_indices=torch.cummin(cm, 1).indices,
           r=cmr, r_values=torch.cummax(cmr, 1).values, r_indices=torch.cummax(cmr, 1).indices,
           r_min_values=torch.cummin(cmr, 0).values, r_min_indices=torch.cummin(cmr, 0).indices,
           i=cmi, i_max_values=torch.cummax(cmi, 1).values, i_max_indices=torch.cummax(cmi, 1).indices,
           i_min_values=torch.cummin(cmi, 1).values, i_min_indices=torch.cummin(cmi, 1).indices)

    md = torch.randn(3, 4)
    md_nan = torch.tensor([[1.0, 5.0, 3.0, 2.0], [4.0, nan, 0.0, nan]])
    mdi = torch.tensor([[5, -1, 3], [2, 8, 4]])
    w.case("median", x=md, all=torch.median(md).reshape(1),
           values1=torch.median(md, 1, keepdim=True).values, indices1=torch.median(md, 1, keepdim=True).indices,
           values0=torch.median(md, 0, keepdim=True).values, indices0=torch.median(md, 0, keepdim=True).indices,
           nan=md_nan, nan_values=torch.median(md_nan, 1, keepdim=True).values,
           nan_indices=torch.median(md_nan, 1, keepdim=True).indices,
           i=mdi, i_values=torch.median(mdi, 1, keepdim=True).values, i_indices=torch.median(mdi, 1, keepdim=True).indices)

    qx = torch.randn(4, 5, dtype=torch.float64)
    w.case("quantile", x=qx, q30_1=torch.quantile(qx, 0.3, 1, keepdim=True),
           q75_0=torch.quantile(qx, 0.75, 0, keepdim=True), q0_1=torch.quantile(qx, 0.0, 1, keepdim=True),
           q100_1=torch.quantile(qx, 1.0, 1, keepdim=True), q40_all=torch.quantile(qx, 0.4).reshape(1),
           nan=md_nan.double(), nan_q=torch.quantile(md_nan.double(), 0.5, 1, keepdim=True))

    seq = torch.tensor([1.0, 3.0, 3.0, 5.0, 7.0])
    vals = torch.tensor([[0.0, 1.0, 3.0], [4.0, 7.0, 9.0]])
    rows = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 5.0, 5.0, 9.0]])
    rvals = torch.tensor([[2.0, 4.0, 0.0], [5.0, 10.0, 1.0]])
    w.case("searchsorted", seq=seq, values=vals, left=torch.searchsorted(seq, vals),
           right=torch.searchsorted(seq, vals, right=True),
           rows=rows, row_values=rvals, rows_left=torch.searchsorted(rows, rvals),
           rows_right=torch.searchsorted(rows, rvals, right=True),
           bucket=torch.bucketize(vals, seq), bucket_right=torch.bucketize(vals, seq, right=True),
           int_seq=seq.long(), int_values=vals.long(), int_left=torch.searchsorted(seq.long(), vals.long()))

    # ---- selection and counting (kiln/tensor/select.hpp)
    nz = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    w.case("nonzero", x=nz, out=torch.nonzero(nz), bools=nz != 0, zeros=torch.zeros(2, 2),
           zeros_out=torch.nonzero(torch.zeros(2, 2)))
    msx = torch.randn(3, 4)
    msm = torch.rand(3, 4) > 0.5
    msr = torch.tensor([[True, False, False, True]])
    w.case("masked_select", x=msx, mask=msm, out=torch.masked_select(msx, msm), row=msr,
           row_out=torch.masked_select(msx, msr))
    ux = torch.tensor([[3.0, 1.0, 2.5], [1.0, 3.0, -1.0]])
    uv, ui, uc = torch.unique(ux, return_inverse=True, return_counts=True)
    uix = torch.tensor([5, 2, 5, 5, 0])
    w.case("unique", x=ux, values=uv, inverse=ui, counts=uc, i=uix, i_values=torch.unique(uix))
    bx = torch.tensor([0, 2, 2, 5, 1, 2])
    bwt = torch.randn(6)
    w.case("bincount", x=bx, out=torch.bincount(bx), long=torch.bincount(bx, minlength=8), weights=bwt,
           weighted=torch.bincount(bx, weights=bwt), empty=torch.zeros(0, dtype=torch.long),
           empty_out=torch.bincount(torch.zeros(0, dtype=torch.long), minlength=3))
    hx = torch.tensor([[1.0, 2.0, 1.0], [4.0, 0.5, 3.0]])
    hd = torch.randn(50) * 0.4
    w.case("histc", x=hx, ranged=torch.histc(hx, bins=4, min=0, max=3), own=torch.histc(hx, bins=5),
           wide=hd, default=torch.histc(hd))

    # ---- einsum (kiln/tensor/einsum.hpp)
    ea, eb = torch.randn(3, 4), torch.randn(4, 5)
    ebat1, ebat2 = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    esq = torch.randn(4, 4)
    ev1, ev2 = torch.randn(4), torch.randn(4)
    e3 = torch.randn(2, 3, 4)
    w.case("einsum", a=ea, b=eb, matmul=torch.einsum("ij,jk->ik", ea, eb), implicit=torch.einsum("ij,jk", ea, eb),
           transposed_out=torch.einsum("ij,jk->ki", ea, eb),
           b1=ebat1, b2=ebat2, batched=torch.einsum("bij,bjk->bik", ebat1, ebat2),
           batch_last=torch.einsum("bij,bjk->ikb", ebat1, ebat2),
           sq=esq, diag=torch.einsum("ii->i", esq), trace=torch.einsum("ii", esq).reshape(1),
           transpose=torch.einsum("ij->ji", ea), row_sums=torch.einsum("ij->i", ea),
           v1=ev1, v2=ev2, dot=torch.einsum("i,i->", ev1, ev2).reshape(1), outer=torch.einsum("i,j->ij", ev1, ev2),
           x3=e3, reduce_mid=torch.einsum("ijk->ik", e3), permute=torch.einsum("ijk->kij", e3),
           bilinear=torch.einsum("ijk,jk->ji", e3, ea),
           private=torch.einsum("ij,kl->ik", ea, eb),
           diag_times=torch.einsum("ii,ij->ij", esq, eb))

    # ---- sliding windows and sub-pixel rearrangement (kiln/tensor/unfold.hpp)
    import torch.nn.functional as F
    ux = torch.randn(2, 3, 5, 6)
    w.case("unfold", x=ux, basic=F.unfold(ux, (2, 3)),
           strided=F.unfold(ux, (3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3)))
    fc = torch.randn(2, 3 * 6, 16)
    fc2 = torch.randn(2, 3 * 6, F.unfold(ux, (3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3)).shape[2])
    w.case("fold", cols=fc, basic=F.fold(fc, (5, 6), (2, 3)), cols2=fc2,
           strided=F.fold(fc2, (5, 6), (3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3)))
    px = torch.randn(2, 8, 3, 4)
    py = torch.randn(1, 2, 6, 4)
    w.case("pixel_shuffle", x=px, shuffled=F.pixel_shuffle(px, 2), y=py, unshuffled=F.pixel_unshuffle(py, 2),
           x3=px[0], shuffled3=F.pixel_shuffle(px[0], 2))

    # ---- bitwise ops of integer arithmetic (kiln/tensor/bitwise.hpp)
    bx = torch.tensor([[5, -7, 0], [123456789, -1, 64]])
    bs = torch.tensor([[0, 1, 2], [3, 62, 5]])
    bb = torch.tensor([[True, False, True]])
    w.case("bitwise", x=bx, not_=torch.bitwise_not(bx), left3=torch.bitwise_left_shift(bx, 3),
           right2=torch.bitwise_right_shift(bx, 2), shifts=bs, left_by=torch.bitwise_left_shift(bx, bs.clamp(max=20)),
           right_by=torch.bitwise_right_shift(bx, bs), big=torch.tensor([1, -1]),
           big_left=torch.bitwise_left_shift(torch.tensor([1, -1]), 62), bools=bb, bools_not=torch.bitwise_not(bb))

    # ---- einsum of three operands
    ca, cb, cc = torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 5)
    cv = torch.randn(3)
    cbat = torch.randn(2, 3, 4)
    w.case("einsum3", a=ca, b=cb, c=cc, v=cv, batch=cbat, chain=torch.einsum("ij,jk,kl->il", ca, cb, cc),
           implicit=torch.einsum("ij,jk,kl", ca, cb, cc), scaled=torch.einsum("ij,j,jk->ik", ca, cv, cb),
           shared=torch.einsum("bjk,j,bj->bk", cbat, cv, ca), total=torch.einsum("ij,jk,kl->", ca, cb, cc).reshape(1))

    # ---- bitwise and / or / xor (kiln/tensor/bitwise.hpp), every int dtype and broadcasting
    ba = torch.tensor([[5, -7, 0, 2**62 + 12345], [-(2**63), -1, 64, 2**63 - 1]])
    bb = torch.tensor([[3, 12, -1, -(2**40) - 3], [-1, 2**50 + 7, -64, -(2**63)]])
    brow = torch.tensor([[-6, 9, 1, 2**33]])
    b32a, b32b = torch.randint(-2**31, 2**31 - 1, (3, 4), dtype=torch.int32), torch.randint(-2**31, 2**31 - 1, (3, 4), dtype=torch.int32)
    b8a, b8b = torch.randint(0, 256, (3, 4), dtype=torch.uint8), torch.randint(0, 256, (3, 4), dtype=torch.uint8)
    bla, blb = torch.rand(2, 3) > 0.5, torch.rand(2, 3) > 0.5
    w.case("bitwise_binary", a=ba, b=bb, and_=ba & bb, or_=ba | bb, xor_=ba ^ bb, row=brow,
           and_row=ba & brow, or_row=ba | brow, xor_row=ba ^ brow,
           a32=b32a, b32=b32b, and32=b32a & b32b, or32=b32a | b32b, xor32=b32a ^ b32b,
           a8=b8a, b8=b8b, and8=b8a & b8b, or8=b8a | b8b, xor8=b8a ^ b8b,
           la=bla, lb=blb, land=bla & blb, lor=bla | blb, lxor=bla ^ blb)

    # ---- searchsorted on a longer sequence, with values that hit its elements exactly
    long_seq = torch.sort(torch.randint(-40, 40, (97,)).double()).values
    long_values = torch.cat([torch.randn(30, dtype=torch.float64) * 30, long_seq[::7], long_seq[:7]]).reshape(3, -1)
    w.case("searchsorted_long", seq=long_seq, values=long_values, left=torch.searchsorted(long_seq, long_values),
           right=torch.searchsorted(long_seq, long_values, right=True))

    # ---- bitwise and / or / xor with an integer
    bsx = torch.tensor([[5, -7, 0], [123456789, -1, 64]])
    w.case("bitwise_scalar", x=bsx, and_=torch.bitwise_and(bsx, 6), or_=torch.bitwise_or(bsx, -8),
           xor_=torch.bitwise_xor(bsx, 2**40 + 3))

    # ---- einsum with "..." (the dims no letter names, aligned on the right)
    ea4, eb4 = torch.randn(2, 3, 4, 5), torch.randn(3, 5, 6)
    w.case("einsum_ellipsis", a=ea4, b=eb4, batched=torch.einsum("...ij,...jk->...ik", ea4, eb4),
           implicit=torch.einsum("...ij,...jk", ea4, eb4), front=torch.einsum("i...->...i", ea4),
           middle=torch.einsum("a...d->ad", ea4))

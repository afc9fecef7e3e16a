"""Golden cases for layout and indexing ops: permute, expand, repeat, slicing, cat/stack,
split/chunk, flip/roll, gather/scatter, index_select/index_add, tril/triu, one_hot, pad."""
import torch
import torch.nn.functional as F


def cases(w):
    x = torch.randn(2, 3, 4)
    w.case("permute", x=x, out=x.permute(2, 0, 1))
    w.case("transpose", x=x, last=x.transpose(-2, -1), outer=x.transpose(0, 2))

    e = torch.randn(3, 1)
    w.case("expand", x=e, out=e.expand(2, 3, 4), same_rank=e.expand(-1, 5))
    r = torch.randn(2, 3)
    w.case("repeat", x=r, out=r.repeat(2, 3), rows=r.repeat(3, 1))

    s = torch.randn(4, 5, 6)
    w.case("slice", x=s,
           steps=s[1:3, ::2, -3:],
           negative=s[-1:, 1:5:3, -5:-1:2],
           index=s[2:3, :, 4:5],
           clamped=s[-10:2, 3:100, :],
           empty=s[:, 5:, :])
    a = torch.randn(4, 5)
    v = torch.randn(2, 3)
    out = a.clone()
    out[1:3, ::2] = v
    w.case("slice_assign", x=a, value=v, out=out)

    n = torch.arange(10 * 3, dtype=torch.float32).reshape(10, 3)
    w.case("narrow", x=n, out=n.narrow(0, 2, 5), negative=n.narrow(0, -3, 2), cols=n.narrow(1, 1, 2))
    w.case("chunk", x=n, **{f"c{i}": t for i, t in enumerate(torch.chunk(n, 4, 0))})
    w.case("split", x=n, **{f"s{i}": t for i, t in enumerate(torch.split(n, 4, 0))},
           **{f"z{i}": t for i, t in enumerate(torch.split(n, [2, 5, 3], 0))})

    c1, c2, c3 = torch.randn(2, 3), torch.randn(4, 3), torch.randn(0, 3)
    w.case("cat_rows", a=c1, b=c2, c=c3, out=torch.cat([c1, c3, c2], 0))
    d1, d2 = torch.randn(2, 3), torch.randn(2, 1)
    w.case("cat_last", a=d1, b=d2, out=torch.cat([d1, d2, d1], -1))
    t1, t2 = torch.randn(3, 2), torch.randn(2, 4)
    w.case("cat_transposed", a=t1, b=t2, out=torch.cat([t1.t(), t2], 1))
    k = torch.randn(2, 3, 2)
    w.case("cat_middle", a=k, out=torch.cat([k, k[:, :1], k], 1))

    p, q = torch.randn(2, 3), torch.randn(2, 3)
    w.case("stack", a=p, b=q, first=torch.stack([p, q, p], 0), last=torch.stack([p, q], -1),
           middle=torch.stack([p, q], 1))

    f = torch.randn(2, 3, 4)
    w.case("flip", x=f, outer=torch.flip(f, [0, 2]), last=torch.flip(f, [-1]),
           transposed=torch.flip(f.transpose(0, 2), [1]))
    ro = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    w.case("roll", x=ro, right=torch.roll(ro, 1, 1), left=torch.roll(ro, -1, 0), wrap=torch.roll(ro, 5, 1),
           neg_dim=torch.roll(ro, 2, -1))

    g = torch.randn(3, 4)
    gi0 = torch.tensor([[2, 0, 1, 1], [0, 2, 2, 0]])
    gi1 = torch.tensor([[3, 0], [1, 1], [2, 3]])
    gi_small = torch.tensor([[1], [0]])
    w.case("gather", x=g, index0=gi0, out0=torch.gather(g, 0, gi0), index1=gi1, out1=torch.gather(g, 1, gi1),
           index_small=gi_small, out_small=torch.gather(g, 1, gi_small),
           transposed=torch.gather(g.t(), 1, gi0.t().contiguous()))
    g3 = torch.randn(2, 3, 4)
    gi3 = torch.randint(0, 3, (2, 2, 4))
    w.case("gather3", x=g3, index=gi3, out=torch.gather(g3, 1, gi3))

    z = torch.randn(3, 5)
    si0 = torch.tensor([[0, 1, 2, 0, 1], [2, 0, 1, 1, 0]])  # no duplicates within a column
    src0 = torch.randn(2, 5)
    si1 = torch.tensor([[4, 0], [1, 3], [2, 0]])
    src1 = torch.randn(3, 3)
    w.case("scatter", x=z, index0=si0, src0=src0, out0=torch.scatter(z, 0, si0, src0),
           index1=si1, src1=src1, out1=torch.scatter(z, 1, si1, src1))
    sa = torch.randn(3, 4)
    sai = torch.tensor([[0, 0, 2, 1], [0, 1, 1, 1], [2, 2, 2, 0]])
    sas = torch.randn(3, 4)
    sai1 = torch.tensor([[3, 3, 0], [1, 1, 1], [0, 2, 0]])
    w.case("scatter_add", x=sa, index0=sai, src=sas, out0=torch.scatter_add(sa, 0, sai, sas),
           index1=sai1, out1=torch.scatter_add(sa, 1, sai1, sas[:, :3]))

    xs = torch.randn(4, 3)
    ii0 = torch.tensor([3, 0, 3, 1])
    ii1 = torch.tensor([2, 0])
    w.case("index_select", x=xs, index0=ii0, out0=torch.index_select(xs, 0, ii0), index1=ii1,
           out1=torch.index_select(xs, 1, ii1), transposed=torch.index_select(xs.t(), 1, ii0))
    ia = torch.randn(5, 3)
    iai0 = torch.tensor([0, 4, 2, 0])
    iav0 = torch.randn(4, 3)
    iai1 = torch.tensor([2, 2, 0, 1, 2])
    iav1 = torch.randn(5, 5)
    w.case("index_add", x=ia, index0=iai0, values0=iav0, out0=ia.index_add(0, iai0, iav0),
           index1=iai1, values1=iav1, out1=ia.index_add(1, iai1, iav1))

    m = torch.randn(3, 4)
    mb = torch.randn(2, 3, 3)
    tri = {}
    for d in (-1, 0, 1):
        name = {-1: "m1", 0: "0", 1: "p1"}[d]
        tri[f"tril_{name}"] = torch.tril(m, d)
        tri[f"triu_{name}"] = torch.triu(m, d)
        tri[f"btril_{name}"] = torch.tril(mb, d)
        tri[f"btriu_{name}"] = torch.triu(mb, d)
    w.case("triangle", x=m, batch=mb, **tri)

    oh = torch.tensor([[0, 3, 1], [4, 4, 2]])
    w.case("one_hot", x=oh, out=F.one_hot(oh, 5))

    pc = torch.randn(2, 3)
    w.case("pad_constant", x=pc, last=F.pad(pc, (1, 2), value=0.5), both=F.pad(pc, (1, 1, 2, 0)))
    pr = torch.randn(1, 2, 4)
    pr4 = torch.randn(1, 2, 3, 3)
    w.case("pad_reflect", x=pr, out=F.pad(pr, (2, 1), mode="reflect"), x4=pr4,
           out4=F.pad(pr4, (1, 2, 2, 1), mode="reflect"))
    w.case("pad_replicate", x=pr, out=F.pad(pr, (2, 3), mode="replicate"), x4=pr4,
           out4=F.pad(pr4, (1, 2, 3, 1), mode="replicate"))

    ints = torch.randint(-50, 50, (3, 4))
    bools = torch.rand(3, 4) > 0.5
    sel = torch.tensor([2, 0, 2])
    w.case("int_bool", ints=ints, bools=bools,
           int_cat=torch.cat([ints, ints[:1]], 0), bool_cat=torch.cat([bools, bools[:, :2]], 1),
           int_flip=torch.flip(ints, [0, 1]), bool_flip=torch.flip(bools, [1]),
           int_select=torch.index_select(ints, 0, sel), bool_select=torch.index_select(bools, 1, sel),
           int_gather=torch.gather(ints, 1, torch.tensor([[3, 0], [1, 1], [0, 2]])),
           int_scatter_add=torch.scatter_add(ints, 0, torch.tensor([[0, 0, 1, 2]]), ints[:1] * 2))

"""Golden recurrent layers from torch.nn (tests/nn/rnn_test.cpp): LSTM, GRU, RNN and their
cells. For each case: the parameters (state_dict names, prefixed "w."), the input x and
initial states h0 / c0 when given, the outputs (y, h_n, c_n for the layers; h, c for the
cells), and for the loss sum over outputs o of sum(o * r.o), with fixed random r.o: the
gradients of x ("dx"), of the initial states ("dh0", "dc0") and of each parameter
("d.<name>"). All in f64 with PyTorch's default initialization."""
import torch
import torch.nn as nn

f64 = torch.float64


def rnn_case(w, name, module, x, state=None):
    module = module.double()
    tensors = {f"w.{k}": v.clone() for k, v in module.state_dict().items()}
    x = x.to(f64).clone().requires_grad_(True)
    tensors["x"] = x.detach()
    inputs = {}
    if state is not None:
        labels = ("h0", "c0") if isinstance(state, tuple) else ("h0",)
        values = state if isinstance(state, tuple) else (state,)
        for label, v in zip(labels, values):
            inputs[label] = v.to(f64).clone().requires_grad_(True)
            tensors[label] = v.detach()
    is_cell = isinstance(module, (nn.LSTMCell, nn.GRUCell, nn.RNNCell))
    args = tuple(inputs.values())
    if not args:
        result = module(x)
    else:
        result = module(x, args if len(args) == 2 else args[0])
    if is_cell:
        outs = dict(zip(("h", "c"), result)) if isinstance(result, tuple) else {"h": result}
    else:
        y, final = result
        outs = {"y": y}
        outs.update(zip(("h_n", "c_n"), final) if isinstance(final, tuple) else [("h_n", final)])
    loss = 0
    for label, out in outs.items():
        r = torch.randn(out.shape, dtype=f64)
        tensors[label] = out.detach()
        tensors[f"r.{label}"] = r
        loss = loss + (out * r).sum()
    loss.backward()
    tensors["dx"] = x.grad
    for label, v in inputs.items():
        tensors[f"d{label}"] = v.grad
    for k, p in module.named_parameters():
        tensors[f"d.{k}"] = p.grad
    w.case(name, **tensors)


def cases(w):
    randn = lambda *s: torch.randn(*s, dtype=f64)
    # The configurations are repeated in tests/nn/rnn_test.cpp: input 4, hidden 5, batch 2,
    # sequence 3.
    for kind, layer, cell in (("lstm", nn.LSTM, nn.LSTMCell), ("gru", nn.GRU, nn.GRUCell)):
        lstm = kind == "lstm"
        state = lambda *s: (randn(*s), randn(*s)) if lstm else randn(*s)
        rnn_case(w, f"{kind}_2_layers_bidirectional", layer(4, 5, num_layers=2, bidirectional=True, batch_first=True),
                 randn(2, 3, 4))
        rnn_case(w, f"{kind}_initial_state", layer(4, 5, batch_first=True), randn(2, 3, 4), state(1, 2, 5))
        # Time-major input (batch_first=False), no biases, both directions.
        rnn_case(w, f"{kind}_no_bias_time_major", layer(4, 5, bias=False, bidirectional=True), randn(3, 2, 4))
        rnn_case(w, f"{kind}_cell", cell(4, 5), randn(2, 4), state(2, 5))

    # ---- Elman RNN (appended: the cases above keep their inputs)
    rnn_case(w, "rnn_2_layers_bidirectional", nn.RNN(4, 5, num_layers=2, bidirectional=True, batch_first=True),
             randn(2, 3, 4))
    rnn_case(w, "rnn_relu_initial_state", nn.RNN(4, 5, nonlinearity="relu", batch_first=True), randn(2, 3, 4),
             randn(1, 2, 5))
    rnn_case(w, "rnn_relu_no_bias_time_major", nn.RNN(4, 5, num_layers=2, nonlinearity="relu", bias=False,
                                                      bidirectional=True), randn(3, 2, 4))
    rnn_case(w, "rnn_cell", nn.RNNCell(4, 5), randn(2, 4), randn(2, 5))
    rnn_case(w, "rnn_cell_relu", nn.RNNCell(4, 5, nonlinearity="relu"), randn(2, 4), randn(2, 5))

    # ---- LSTM with proj_size (appended)
    rnn_case(w, "lstm_proj_2_layers_bidirectional",
             nn.LSTM(4, 5, num_layers=2, bidirectional=True, proj_size=3, batch_first=True), randn(2, 3, 4))
    rnn_case(w, "lstm_proj_initial_state", nn.LSTM(4, 5, proj_size=2, batch_first=True), randn(2, 3, 4),
             (randn(1, 2, 2), randn(1, 2, 5)))

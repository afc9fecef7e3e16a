// kiln::optim: optimizers (SGD, Adam, AdamW, RMSProp, AdaGrad, Lion, NAdam, RAdam, Adamax,
// Adadelta, ASGD, Rprop, Adan, Muon, L-BFGS) over a module's
// parameters, gradient accumulation and clipping, learning-rate schedulers, and the fused
// optimizer steps on plain tensors (adam_step). See docs/optimizers.md.
#pragma once

#include "kiln/optim/adam.hpp"
#include "kiln/optim/gradients.hpp"
#include "kiln/optim/lbfgs.hpp"
#include "kiln/optim/optimizer.hpp"
#include "kiln/optim/rules.hpp"
#include "kiln/optim/scheduler.hpp"

// kiln::nn: modules generic over the backend (a module written once runs for inference on
// B and trains on Autodiff<B>): the module system, layers, losses, initializers, and
// saving and loading (nn::save, nn::load; libkiln_store, which kiln::cpu brings). See
// docs/modules.md.
#pragma once

#include "kiln/nn/attention.hpp"
#include "kiln/nn/conv.hpp"
#include "kiln/nn/ctc.hpp"
#include "kiln/nn/distance.hpp"
#include "kiln/nn/init.hpp"
#include "kiln/nn/layers.hpp"
#include "kiln/nn/linear.hpp"
#include "kiln/nn/loss.hpp"
#include "kiln/nn/module.hpp"
#include "kiln/nn/norm.hpp"
#include "kiln/nn/param.hpp"
#include "kiln/nn/pool.hpp"
#include "kiln/nn/positional.hpp"
#include "kiln/nn/resample.hpp"
#include "kiln/nn/rnn.hpp"
#include "kiln/nn/state.hpp"
#include "kiln/nn/valid.hpp"

// kiln::train: the Learner (a training loop over any range of batches), metrics, the live
// dashboard, CSV / JSONL logs, checkpoints with resume, early stopping and the best model.
// Needs kiln::train (target_link_libraries(app kiln::train)). See docs/train.md.
#pragma once

#include "kiln/train/chart.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/dashboard.hpp"
#include "kiln/train/interrupt.hpp"
#include "kiln/train/learner.hpp"
#include "kiln/train/metric.hpp"
#include "kiln/train/session.hpp"

// kiln::train: the Learner (a training loop over any range of batches), metrics, the live
// dashboard, CSV / JSONL logs, checkpoints with resume, early stopping and the best model.
// Compiled parts in libkiln_train (kiln::train, which kiln::cpu brings). See docs/train.md.
#pragma once

#include "kiln/train/chart.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/dashboard.hpp"
#include "kiln/train/interrupt.hpp"
#include "kiln/train/learner.hpp"
#include "kiln/train/metric.hpp"
#include "kiln/train/session.hpp"
#include "kiln/train/task_metric.hpp"

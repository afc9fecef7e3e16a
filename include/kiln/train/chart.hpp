// The learning-curve chart a run writes at its end (learning_curves.svg in the output
// directory): one panel per metric, each with the train and valid value of every epoch.
// Plain SVG text, no dependencies.
#pragma once

#include "kiln/train/metric.hpp"

#include <string>
#include <utility>
#include <vector>

namespace kiln::train {

// An SVG document with one panel for each of `metrics` that has a value in some epoch of
// `history` (by default the loss and the accuracy), side by side: axes with ticks, a
// polyline and a dot per epoch for train and for valid, and a legend. The x axis counts
// epochs; an epoch's values stand at its end. `train_loss` is the training loss within
// epochs, (x in epochs: 0.5 is the middle of the first, value) pairs, drawn as a thin line
// in the loss panel, so that one epoch gives a curve and not a dot. An empty history and
// no train_loss give a document that says so.
std::string learning_curves_svg(const std::vector<EpochRecord>& history,
                                const std::vector<std::string>& metrics = {"loss", "accuracy"},
                                const std::string& title = "Learning curves",
                                const std::vector<std::pair<double, double>>& train_loss = {});

}  // namespace kiln::train

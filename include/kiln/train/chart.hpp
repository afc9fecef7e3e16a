// The learning-curve chart a run writes at its end (learning_curves.svg in the output
// directory): one panel per metric, each with the train and valid value of every epoch.
// Plain SVG text, no dependencies.
#pragma once

#include "kiln/train/metric.hpp"

#include <string>
#include <vector>

namespace kiln::train {

// An SVG document with one panel for each of `metrics` that has a value in some epoch of
// `history` (by default the loss and the accuracy), side by side: axes with ticks, a
// polyline and a dot per epoch for train and for valid, and a legend. An empty history
// gives a document that says so.
std::string learning_curves_svg(const std::vector<EpochRecord>& history,
                                const std::vector<std::string>& metrics = {"loss", "accuracy"},
                                const std::string& title = "Learning curves");

}  // namespace kiln::train

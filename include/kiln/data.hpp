// kiln::data: datasets and their combinators, batchers, the threaded DataLoader, image
// transforms, and the readers (IDX / MNIST / Fashion-MNIST, CIFAR, image folders, CSV).
// Compiled parts in libkiln_data (kiln::data, which kiln::cpu brings). See docs/data.md.
#pragma once

#include "kiln/data/batcher.hpp"
#include "kiln/data/cifar.hpp"
#include "kiln/data/csv.hpp"
#include "kiln/data/dataset.hpp"
#include "kiln/data/epoch.hpp"
#include "kiln/data/idx.hpp"
#include "kiln/data/image.hpp"
#include "kiln/data/image_folder.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/data/random.hpp"
#include "kiln/data/stack.hpp"
#include "kiln/data/transforms.hpp"

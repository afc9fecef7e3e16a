// kiln::dist: data-parallel training across processes and hosts over MPI (docs/distributed.md):
// the process group and collectives, DataParallel for a module's gradients, and the
// distributed sampler for kiln::data. Link kiln::dist (find_package(Kiln COMPONENTS dist)).
#pragma once

#include "kiln/dist/collectives.hpp"
#include "kiln/dist/data_parallel.hpp"
#include "kiln/dist/process_group.hpp"
#include "kiln/dist/sampler.hpp"

// Shared by the reductions, arg-reductions and scans (backends/vulkan/src/reduce.cpp): the
// input is contiguous and seen as [outer, n, inner] around the reduced dim, so a row (one
// output, or one line of a scan) is n elements at stride inner.
// Parameters (ints): [0] outer, [1] n, [2] inner, [3] parts per row, [4] elements per part,
// [5] input element offset, [6] work items (rows, times parts when rows are split), [7] the
// divisor of a mean's last pass, 0 for every other pass (no division). Arg-reductions and
// scans read [1], [2], [5] and [6] only.

// The index of row r's first element, before the input offset.
int row_start(int r) {
  const int n = params[1], inner = params[2];
  const int o = r / inner, i = r - o * inner;
  return o * n * inner + i;
}

// PyTorch checkpoints written by torch.save (tests/golden/store/, from gen_store.py):
// every dtype, views into storages (transposed, sliced, strided, expanded), shared
// storages, parameters, a module's state_dict, nested checkpoints and ZIP64 archives.
#include "fixtures.hpp"
#include "store_test.hpp"

#include <kiln/store/torch.hpp>

namespace kiln::store::test {
namespace {

TEST(Torch, ReadsEveryDtypeAndViewOfAStateDictExactly) {
  expect_same(load_torch(fixture("state_dict.pt")), state_dict_tensors());
}

TEST(Torch, ReadsFromMemoryLikeFromAFile) {
  const auto bytes = read_file(fixture("state_dict.pt"));
  expect_same(load_torch(bytes, "in memory"), state_dict_tensors());
}

TEST(Torch, MaterializesTransposedSlicedStridedAndExpandedViewsContiguously) {
  const NamedTensors loaded = load_torch(fixture("state_dict.pt"));
  EXPECT_EQ(loaded.at("transposed").to_vec<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded.at("shared.slice").to_vec<std::int64_t>(), (std::vector<std::int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(loaded.at("shared.strided").to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 4, 7}));
  EXPECT_EQ(loaded.at("expanded").to_vec<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(Torch, TensorsSharingAStorageAreIndependentCopies) {
  NamedTensors loaded = load_torch(fixture("state_dict.pt"));
  loaded.at("shared.whole").as_mut<std::int64_t>()[3] = 100;
  EXPECT_EQ(loaded.at("shared.again").as<std::int64_t>()[3], 3);
  EXPECT_EQ(loaded.at("shared.slice").as<std::int64_t>()[1], 3);
}

TEST(Torch, ReadsAModuleStateDictWithItsMetadata) {
  const NamedTensors loaded = load_torch(fixture("module.pt"));
  EXPECT_EQ(loaded.names(), (std::vector<std::string>{"weight", "bias"}));
  expect_same(loaded.at("weight"), values<float>({0, 0.25f, 0.5f, 0.75f, 1, 1.25f}, {2, 3}), "weight");
  expect_same(loaded.at("bias"), values<float>({0.5f, -0.5f}, {2}), "bias");
}

TEST(Torch, ReadsAZip64Archive) { expect_same(load_torch(fixture("zip64.pt")), state_dict_tensors()); }

TEST(Torch, FloatDtypeConvertsFloatsOnly) {
  const NamedTensors loaded = load_torch(fixture("state_dict.pt"), {.float_dtype = DType::f64});
  for (const auto& [name, data] : state_dict_tensors())
    expect_same(loaded.at(name), is_float(data.dtype()) ? data.convert(DType::f64) : data, name);
  EXPECT_KILN_ERROR(load_torch(fixture("state_dict.pt"), {.float_dtype = DType::u8}), "float_dtype", "u8");
}

TEST(Torch, NestedCheckpointNeedsSkipNonTensorsAndFlattensNames) {
  EXPECT_KILN_ERROR(load_torch(fixture("nested.pt")), "nested.pt", "entry 'epoch' is the int 3, not a tensor",
                    "skip_non_tensors");
  const NamedTensors loaded = load_torch(fixture("nested.pt"), {.float_dtype = std::nullopt, .skip_non_tensors = true});
  EXPECT_EQ(loaded.names(), (std::vector<std::string>{"model.w", "model.inner.b"}));
  expect_same(loaded.at("model.w"), values<float>({1, 1}, {2}), "model.w");
  expect_same(loaded.at("model.inner.b"), values<std::int64_t>({0}, {1}), "model.inner.b");
}

TEST(Torch, ReadsPicklesBuiltByHand) {
  // {'a': tensor, 'b': view of the same storage}, built with the test's pickle writer.
  const auto pickle = Pickle()
                          .op('}')
                          .op('(')
                          .str("a")
                          .tensor("FloatStorage", "0", 4, 0, {2, 2}, {2, 1})
                          .str("b")
                          .tensor("FloatStorage", "0", 4, 1, {2}, {2})
                          .op('u')
                          .done();
  const auto archive = torch_archive(pickle, {{"0", raw_bytes<float>({1, 2, 3, 4})}});
  const NamedTensors loaded = load_torch(archive, "hand.pt");
  expect_same(loaded.at("a"), values<float>({1, 2, 3, 4}, {2, 2}), "a");
  expect_same(loaded.at("b"), values<float>({2, 4}, {2}), "b");
}

}  // namespace
}  // namespace kiln::store::test

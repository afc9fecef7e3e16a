// safetensors: round trips of every dtype, 16-bit storage, conversion on load, metadata,
// listing without loading, the memory map, the file PyTorch-side tooling writes, and
// atomic saves that fail halfway.
#include "fixtures.hpp"
#include "store_test.hpp"

#include <kiln/store/safetensors.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <bit>
#include <csignal>
#include <fstream>

namespace kiln::store::test {
namespace {

TEST(Safetensors, RoundTripOfEveryDtypeIsBitIdentical) {
  TempDir dir;
  NamedTensors tensors = plain_tensors();
  // A NaN with a payload and a negative zero survive only a bitwise copy.
  tensors.insert("nan_payload", values<float>({std::bit_cast<float>(0x7fc00123u), -0.f}, {2}));
  save_safetensors(dir / "w.safetensors", tensors);
  expect_same(load_safetensors(dir / "w.safetensors"), tensors);
}

TEST(Safetensors, SerializeWritesTheSameBytesAsSave) {
  TempDir dir;
  const SafetensorsWriteOptions options{.float_dtype = std::nullopt, .metadata = {{"k", "v"}}};
  save_safetensors(dir / "w.safetensors", plain_tensors(), options);
  EXPECT_EQ(read_file(dir / "w.safetensors"), serialize_safetensors(plain_tensors(), options));
}

TEST(Safetensors, KeepsTheOrderOfTheTensors) {
  NamedTensors tensors;
  for (const char* name : {"z", "a", "m", "b"}) tensors.insert(name, values<float>({1.f}, {1}));
  const auto bytes = serialize_safetensors(tensors);
  EXPECT_EQ(SafetensorsFile::from_memory(bytes).names(), (std::vector<std::string>{"z", "a", "m", "b"}));
}

TEST(Safetensors, HeaderIsPaddedSoThatDataIsEightByteAligned) {
  NamedTensors tensors;
  tensors.insert("x", values<double>({1.0}, {1}));
  const auto bytes = serialize_safetensors(tensors);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header + 8);
}

TEST(Safetensors, FloatDtypeOptionStoresFloatsAsF16OrBf16AndKeepsIntegers) {
  NamedTensors tensors;
  tensors.insert("w", values<float>({1.f, -2.5f, 3.14159f, 1e-3f}, {2, 2}));
  tensors.insert("d", values<double>({0.1, 65520.0}, {2}));
  tensors.insert("steps", values<std::int64_t>({7}, {1}));
  for (const DType stored : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(stored));
    const auto bytes = serialize_safetensors(tensors, {.float_dtype = stored, .metadata = {}});
    const auto file = SafetensorsFile::from_memory(bytes);
    EXPECT_EQ(file.info("w").dtype, stored);
    EXPECT_EQ(file.info("d").dtype, stored);
    EXPECT_EQ(file.info("steps").dtype, DType::i64);
    EXPECT_EQ(file.info("w").data_end - file.info("w").data_begin, 4 * 2u);
    expect_same(file.load("w"), tensors.at("w").convert(stored), "w");
    expect_same(file.load("d"), tensors.at("d").convert(stored), "d");
    expect_same(file.load("steps"), tensors.at("steps"), "steps");
  }
  EXPECT_KILN_ERROR(serialize_safetensors(tensors, {.float_dtype = DType::i32, .metadata = {}}), "float_dtype", "i32");
}

TEST(Safetensors, LoadConvertsToTheRequestedDtype) {
  const auto bytes = serialize_safetensors(plain_tensors());
  const auto file = SafetensorsFile::from_memory(bytes);
  expect_same(file.load("i32", DType::f64), plain_tensors().at("i32").convert(DType::f64), "i32 as f64");
  expect_same(file.load("f32", DType::bf16), plain_tensors().at("f32").convert(DType::bf16), "f32 as bf16");
  expect_same(file.load("u8", DType::u8), plain_tensors().at("u8"), "u8 unchanged");
}

TEST(Safetensors, LoadAllConvertsFloatsOnlyToTheRequestedFloatDtype) {
  const auto bytes = serialize_safetensors(plain_tensors());
  const NamedTensors loaded = SafetensorsFile::from_memory(bytes).load_all(DType::f32);
  for (const auto& [name, data] : plain_tensors()) {
    const TensorData expected = is_float(data.dtype()) ? data.convert(DType::f32) : data;
    expect_same(loaded.at(name), expected, name);
  }
}

TEST(Safetensors, MetadataRoundTripsWithCharactersThatNeedEscaping) {
  const std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"quote\"back\\slash", "line\nbreak\ttab\x01"}, {"unicode", "caf\xc3\xa9 \xe2\x9c\x93"}};
  NamedTensors tensors;
  tensors.insert("layer.0/weight \"q\"\n", values<float>({1.f}, {1}));
  const auto bytes = serialize_safetensors(tensors, {.float_dtype = std::nullopt, .metadata = metadata});
  const auto file = SafetensorsFile::from_memory(bytes);
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.names(), tensors.names());
}

TEST(Safetensors, ListsNamesDtypesShapesAndOffsetsWithoutLoading) {
  const auto bytes = serialize_safetensors(plain_tensors());
  const auto file = SafetensorsFile::from_memory(bytes, "listed");
  EXPECT_EQ(file.name(), "listed");
  const NamedTensors tensors = plain_tensors();
  ASSERT_EQ(file.tensors().size(), tensors.size());
  std::uint64_t offset = 0;
  for (const auto& info : file.tensors()) {
    const TensorData& expected = tensors.at(info.name);
    EXPECT_EQ(info.dtype, expected.dtype()) << info.name;
    EXPECT_EQ(info.shape, expected.shape()) << info.name;
    EXPECT_EQ(info.data_begin, offset) << info.name;
    offset = info.data_end;
  }
  EXPECT_TRUE(file.contains("bf16"));
  EXPECT_FALSE(file.contains("missing"));
  EXPECT_KILN_ERROR(file.info("missing"), "listed", "missing");
  EXPECT_KILN_ERROR(file.load("missing"), "listed", "missing");
}

TEST(Safetensors, EmptyFileRoundTrips) {
  const auto bytes = serialize_safetensors(NamedTensors{});
  EXPECT_TRUE(SafetensorsFile::from_memory(bytes).tensors().empty());
}

// Whether /proc/self/maps lists `path` as mapped.
bool is_mapped(const std::filesystem::path& path) {
  std::ifstream maps("/proc/self/maps");
  const std::string wanted = std::filesystem::canonical(path).string();
  for (std::string line; std::getline(maps, line);)
    if (line.ends_with(wanted)) return true;
  return false;
}

TEST(Safetensors, OpenMapsTheFileUntilTheLastCopyIsGone) {
  TempDir dir;
  const auto path = dir / "mapped.safetensors";
  save_safetensors(path, plain_tensors());
  ASSERT_FALSE(is_mapped(path));
  TensorData loaded;
  {
    std::optional<SafetensorsFile> copy;
    {
      const auto file = SafetensorsFile::open(path);
      EXPECT_TRUE(is_mapped(path));
      copy = file;
    }
    EXPECT_TRUE(is_mapped(path));  // the copy keeps the mapping
    loaded = copy->load("f64");
  }
  EXPECT_FALSE(is_mapped(path));
  expect_same(loaded, plain_tensors().at("f64"), "loaded tensors own their bytes");
}

TEST(Safetensors, ReadsTheFileWrittenByPythonExactly) {
  const auto file = SafetensorsFile::open(fixture("python.safetensors"));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"writer", "gen_store.py"}}));
  expect_same(file.load_all(), plain_tensors());
}

TEST(Safetensors, OpenNamesAMissingFileOrADirectory) {
  TempDir dir;
  EXPECT_KILN_ERROR(SafetensorsFile::open(dir / "absent.safetensors"), "absent.safetensors", "cannot open");
  EXPECT_KILN_ERROR(SafetensorsFile::open(dir.path()), dir.path().string(), "directory");
}

// A directory holding w.safetensors from an earlier save: a failed save must leave it as
// it was, with no temporary file beside it.
class SafetensorsAtomicSave : public ::testing::Test {
 protected:
  void SetUp() override {
    save_safetensors(path, plain_tensors());
    before = read_file(path);
  }
  void expect_old_file_intact() const {
    EXPECT_EQ(read_file(path), before);
    EXPECT_EQ(dir.files(), std::vector<std::string>{"w.safetensors"});
  }

  TempDir dir;
  std::filesystem::path path = dir / "w.safetensors";
  std::vector<std::byte> before;
};

TEST_F(SafetensorsAtomicSave, RejectsTensorsItCannotWriteBeforeTouchingTheFile) {
  NamedTensors bad;
  bad.insert("__metadata__", values<float>({1.f}, {1}));
  EXPECT_KILN_ERROR(save_safetensors(path, bad), "__metadata__");
  NamedTensors not_utf8;
  not_utf8.insert("bad\xff", values<float>({1.f}, {1}));
  EXPECT_KILN_ERROR(save_safetensors(path, not_utf8), "UTF-8");
  expect_old_file_intact();
}

// Limits the size of files this process may write (RLIMIT_FSIZE); writes past it fail
// with EFBIG instead of raising SIGXFSZ. Restores both on destruction.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST_F(SafetensorsAtomicSave, AFailedWriteLeavesTheOldFileIntactAndNoTemporaryFile) {
  NamedTensors big;
  big.insert("big", values<float>(std::vector<float>(1 << 20, 1.f), {1 << 20}));  // 4 MiB
  {
    const FileSizeLimit limit(64 << 10);  // the write fails after 64 KiB
    EXPECT_KILN_ERROR(save_safetensors(path, big), path.string(), "writing the temporary file",
                      "the file was left as it was");
  }
  expect_old_file_intact();
  save_safetensors(path, big);  // and with room, it works
  expect_same(load_safetensors(path), big);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"w.safetensors"});
}

TEST_F(SafetensorsAtomicSave, AFailedRenameRemovesTheTemporaryFile) {
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  std::filesystem::create_directory(path / "child");  // a directory cannot be replaced by a file
  EXPECT_KILN_ERROR(save_safetensors(path, plain_tensors()), path.string(), "renaming");
  EXPECT_EQ(dir.files(), std::vector<std::string>{"w.safetensors"});
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST_F(SafetensorsAtomicSave, SavingIntoAnUnwritableDirectoryFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories; permissions cannot fail here";
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  EXPECT_KILN_ERROR(save_safetensors(path, NamedTensors{}), path.string(), "temporary file");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  expect_old_file_intact();
}

TEST(Safetensors, SavingIntoAMissingDirectoryNamesIt) {
  TempDir dir;
  EXPECT_KILN_ERROR(save_safetensors(dir / "missing" / "w.safetensors", plain_tensors()), "missing/w.safetensors",
                    "No such file or directory");
}

TEST(Safetensors, ASavedFileGetsTheUsualPermissions) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  const mode_t umask = ::umask(022);
  save_safetensors(path, plain_tensors());
  ::umask(umask);
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
}

}  // namespace
}  // namespace kiln::store::test

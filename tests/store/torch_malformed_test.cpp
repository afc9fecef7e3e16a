// Hostile and broken PyTorch checkpoints: pickles that call os.system, unknown and
// refused opcodes, compressed or corrupt archives, views outside their storage. Each must
// give a kiln::Error that names the file and what is wrong, and never run anything.
#include "budget.hpp"
#include "store_test.hpp"

#include <kiln/store/torch.hpp>

namespace kiln::store::test {
namespace {

using namespace std::string_view_literals;  // pickles with NUL bytes in them

NamedTensors load(const std::vector<std::byte>& bytes, const TorchLoadOptions& options = {}) {
  return load_torch(bytes, "bad.pt", options);
}

// {'t': <the tensor written by `tensor`>} over a storage "0" of `storage` bytes.
std::vector<std::byte> one_tensor(const std::function<void(Pickle&)>& tensor, std::vector<std::byte> storage) {
  Pickle pickle;
  pickle.op('}').str("t");
  tensor(pickle);
  pickle.op('s');
  return torch_archive(pickle.done(), {{"0", std::move(storage)}});
}

TEST(TorchMalformed, PickleThatCallsOsSystemThroughReduceIsRefusedByName) {
  // torch.save of an object whose __reduce__ returns os.system, which Linux names posix.system.
  EXPECT_KILN_ERROR(load_torch(fixture("evil_reduce.pt")), "evil_reduce.pt", "data.pkl",
                    "pickle global posix.system is not allowed");
}

TEST(TorchMalformed, HandWrittenPickleThatCallsOsSystemIsRefusedByName) {
  EXPECT_KILN_ERROR(load_torch(fixture("evil_os_system.pt")), "evil_os_system.pt: archive/data.pkl", "pickle byte 19",
                    "pickle global os.system is not allowed");
}

TEST(TorchMalformed, OtherGlobalsAreRefusedByName) {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"builtins", "eval"}, {"subprocess", "Popen"}, {"torch", "load"}, {"collections", "defaultdict"}}) {
    const auto pickle = Pickle().global(module, name).done();
    EXPECT_KILN_ERROR(load(torch_archive(pickle)), fmt::format("pickle global {}.{} is not allowed", module, name));
  }
  // STACK_GLOBAL (protocol 4) goes through the same allow-list.
  const auto stacked = Pickle().str("os").str("system").raw("\x93").done();
  EXPECT_KILN_ERROR(load(torch_archive(stacked)), "pickle global os.system is not allowed");
}

TEST(TorchMalformed, UnknownOpcodeIsNamedWithItsOffset) {
  EXPECT_KILN_ERROR(load_torch(fixture("unknown_opcode.pt")), "unknown_opcode.pt: archive/data.pkl", "pickle byte 5",
                    "opcode 0xff", "unknown opcode");
}

TEST(TorchMalformed, OpcodesThatInstantiateClassesAreRefused) {
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().global("torch", "Size").op(')').raw("\x81").done())), "NEWOBJ");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op('(').raw("ios\nsystem\n").done())), "INST");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().raw("\x82\x01").done())), "EXT1");
}

TEST(TorchMalformed, CompressedEntryIsRefusedByName) {
  EXPECT_KILN_ERROR(load_torch(fixture("compressed.pt")), "compressed.pt", "zip entry 'state_dict/data.pkl'",
                    "compressed (deflate, method 8)");
}

TEST(TorchMalformed, LegacyFormatIsRefusedWithTheReason) {
  EXPECT_KILN_ERROR(load_torch(fixture("legacy.pt")), "legacy.pt", "legacy torch.save format");
}

TEST(TorchMalformed, EveryTruncationOfAValidFileIsAnError) {
  for (const char* name : {"state_dict.pt", "module.pt", "zip64.pt"}) {
    const auto bytes = read_file(fixture(name));
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      SCOPED_TRACE(fmt::format("{} cut to {} bytes", name, size));
      const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
      EXPECT_KILN_ERROR(load_torch(prefix, "cut.pt"), "cut.pt");
    }
  }
}

TEST(TorchMalformed, CorruptedStorageFailsItsChecksum) {
  auto bytes = read_file(fixture("module.pt"));
  const detail::ZipArchive zip(bytes, "module.pt");
  const detail::ZipEntry* storage = zip.find("module/data/0");
  ASSERT_NE(storage, nullptr);
  bytes[storage->data_offset] ^= std::byte{0x40};
  EXPECT_KILN_ERROR(load(bytes), "bad.pt", "zip entry 'module/data/0'", "is corrupt: CRC-32");
}

TEST(TorchMalformed, NotAZipArchive) {
  EXPECT_KILN_ERROR(load(to_bytes("just some text, no zip")), "bad.pt", "not a zip archive");
  EXPECT_KILN_ERROR(load({}), "bad.pt", "not a zip archive");
}

TEST(TorchMalformed, ArchiveWithoutAPickle) {
  EXPECT_KILN_ERROR(load(make_zip({{"archive/version", to_bytes("3\n")}})), "bad.pt", "no <name>/data.pkl entry");
}

TEST(TorchMalformed, BigEndianArchiveIsRefused) {
  const auto archive =
      make_zip({{"archive/data.pkl", Pickle().op('}').done()}, {"archive/byteorder", to_bytes("big")}});
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "'big'-endian");
}

TEST(TorchMalformed, ViewReachingPastItsStorage) {
  const auto archive = one_tensor(
      [](Pickle& p) {
        p.tensor("FloatStorage", "0", 4, 1, {2, 2}, {2, 1});
      },
      raw_bytes<float>({1, 2, 3, 4}));
  EXPECT_KILN_ERROR(load(archive), "bad.pt: tensor 't' (a view of storage '0')", "offset 1 reach element 4",
                    "the storage has 4 elements");
}

TEST(TorchMalformed, StorageSizeDisagreesWithItsEntry) {
  const auto archive =
      one_tensor([](Pickle& p) { p.tensor("DoubleStorage", "0", 4, 0, {4}, {1}); }, raw_bytes<float>({1, 2, 3, 4}));
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "storage '0' holds 4 elements of f64 (32 bytes)",
                    "'archive/data/0' has 16 bytes");
}

TEST(TorchMalformed, StorageWithoutItsEntry) {
  const auto pickle = Pickle().op('}').str("t").tensor("FloatStorage", "7", 1, 0, {1}, {1}).op('s').done();
  EXPECT_KILN_ERROR(load(torch_archive(pickle)), "bad.pt", "storage '7' has no archive entry 'archive/data/7'");
}

TEST(TorchMalformed, UnsupportedTensorDtypeIsNamed) {
  const auto archive =
      one_tensor([](Pickle& p) { p.tensor("CharStorage", "0", 4, 0, {4}, {1}); }, raw_bytes<std::int8_t>({1, 2, 3, 4}));
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "torch.CharStorage", "int8 tensors are not supported");
}

TEST(TorchMalformed, ExpandedViewLargerThanTheLimit) {
  // One float viewed as 4096 x 4096 x 16 (stride 0): 1 GiB from a 4-byte storage.
  const auto archive = one_tensor(
      [](Pickle& p) {
        p.tensor("FloatStorage", "0", 1, 0, {4096, 4096, 16}, {0, 0, 0});
      },
      raw_bytes<float>({1}));
  EXPECT_KILN_ERROR(load(archive), "bad.pt: tensor 't'", "its 1073741824 bytes would bring the tensors read past",
                    "likely decompression bomb");
}

TEST(TorchMalformed, OneTensorUnderVeryManyNamesHitsTheSizeLimit) {
  // A 1 MiB tensor under 200 names is 200 MiB from a file of 1 MiB; under 20, it is read.
  for (const int names : {20, 200}) {
    Pickle pickle;
    pickle.op('}').op('(').str("t0").tensor("FloatStorage", "0", 1 << 18, 0, {1 << 18}, {1}).raw("q\x07"sv);
    for (int i = 1; i < names; ++i) pickle.str(fmt::format("t{}", i)).raw("h\x07"sv);
    const auto archive = torch_archive(pickle.op('u').done(), {{"0", std::vector<std::byte>(1 << 20)}});
    if (names == 20)
      EXPECT_EQ(load(archive).size(), 20u);
    else
      EXPECT_KILN_ERROR(load(archive), "bad.pt: tensor 't", "likely decompression bomb");
  }
}

TEST(TorchMalformed, RankAboveTheLimit) {
  Pickle pickle;
  pickle.op('}').str("t").global("torch._utils", "_rebuild_tensor_v2").op('(');
  pickle.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").integer(1).op('t').op('Q');
  pickle.integer(0).op('(');
  for (int i = 0; i < 65; ++i) pickle.integer(1);
  pickle.op('t').ints({}).raw("\x89").global("collections", "OrderedDict").op(')').op('R').op('t').op('R').op('s');
  EXPECT_KILN_ERROR(load(torch_archive(pickle.done(), {{"0", raw_bytes<float>({1})}})), "a size of 65 dims",
                    "at most 64");
}

TEST(TorchMalformed, RootThatIsNotADict) {
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op(']').done())), "bad.pt", "holds a list of 0, not a dict");
}

TEST(TorchMalformed, NonTensorValuesAreNamedOrSkipped) {
  const auto pickle =
      Pickle().op('}').op('(').str("lr").raw("G?\xb9\x99\x99\x99\x99\x99\x9a").str("name").str("x").op('u').done();
  EXPECT_KILN_ERROR(load(torch_archive(pickle)), "bad.pt", "entry 'lr' is the float 0.1, not a tensor");
  EXPECT_TRUE(load(torch_archive(pickle), {.float_dtype = std::nullopt, .skip_non_tensors = true}).empty());
}

TEST(TorchMalformed, CyclicOrSharedDictIsReadOnce) {
  // d = {}; d['d'] = d
  const auto cyclic = Pickle().op('}').raw("q\x00"sv).str("d").raw("h\x00"sv).op('s').done();
  EXPECT_KILN_ERROR(load(torch_archive(cyclic)), "bad.pt", "entry 'd' is the same dict as the checkpoint itself");
  // {'a': d, 'b': d}: shared dicts could nest into exponentially many paths.
  const auto shared = Pickle().op('}').op('(').str("a").op('}').raw("q\x00"sv).str("b").raw("h\x00"sv).op('u').done();
  EXPECT_KILN_ERROR(load(torch_archive(shared)), "bad.pt", "entry 'b' is the same dict as 'a'");
}

TEST(TorchMalformed, DictsNestedTooDeep) {
  // {'a': {'a': {... 40 levels}}}
  Pickle pickle;
  for (int level = 0; level < 40; ++level) pickle.op('}').str("a");
  pickle.op('}');
  for (int level = 0; level < 40; ++level) pickle.op('s');
  EXPECT_KILN_ERROR(load(torch_archive(pickle.done())), "bad.pt", "nests dicts more than 32 deep");
}

TEST(TorchMalformed, StackAndMemoErrors) {
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op('s').done())), "stack is empty");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().raw("h\x05").done())), "memo entry 5 was never stored");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op('t').done())), "no MARK");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op(']').op('}').done())), "STOP leaves 1 values");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op('}').op('(').str("k").op('u').done())),
                    "cannot form key/value pairs");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().op(')').op('}').op('a').done())), "APPEND needs a list");
}

TEST(TorchMalformed, TruncatedOrTrailingPickle) {
  auto truncated = Pickle().op('}').done();
  truncated.pop_back();  // no STOP
  EXPECT_KILN_ERROR(load(torch_archive(truncated)), "bad.pt: archive/data.pkl", "without a STOP opcode");
  auto trailing = Pickle().op('}').done();
  trailing.push_back(std::byte{'N'});
  EXPECT_KILN_ERROR(load(torch_archive(trailing)), "1 bytes follow STOP");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().raw("X\xff\xff\xff\x7f").done())), "needs 2147483647 bytes");
}

TEST(TorchMalformed, IntegersWiderThan64BitsAreRefused) {
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().raw("\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09").done())),
                    "9 bytes does not fit 64 bits");
  EXPECT_KILN_ERROR(load(torch_archive(Pickle().raw("I99999999999999999999\n").done())), "not an integer");
}

TEST(TorchMalformed, NegativeStridesAreRefused) {
  const auto archive =
      one_tensor([](Pickle& p) { p.tensor("FloatStorage", "0", 2, 1, {2}, {-1}); }, raw_bytes<float>({1, 2}));
  EXPECT_KILN_ERROR(load(archive), "stride must be non-negative ints, found the int -1");
}

// The stride of a dim of size 1 is never stepped along: 2^63 - 1 there is harmless (and used
// to overflow a signed sum while the view was gathered, undefined behaviour).
TEST(TorchMalformed, HugeStrideOnADimOfSizeOneIsIgnored) {
  const auto archive = one_tensor(
      [](Pickle& p) { p.tensor("FloatStorage", "0", 2, 0, {1, 2}, {std::numeric_limits<std::int64_t>::max(), 1}); },
      raw_bytes<float>({1, 2}));
  const NamedTensors tensors = load(archive);
  EXPECT_EQ(tensors.at("t").shape(), Shape({1, 2}));
  EXPECT_EQ(tensors.at("t").to_vec<float>(), (std::vector<float>{1, 2}));
}

TEST(TorchMalformed, BuildMayOnlyTouchDicts) {
  const auto pickle = Pickle().global("torch", "Size").op('(').ints({1}).op('t').op('R').op('}').op('b').done();
  EXPECT_KILN_ERROR(load(torch_archive(pickle)), "BUILD may only set attributes of a dict");
}

TEST(TorchMalformed, DuplicateZipEntries) {
  const auto archive = make_zip({{"archive/data.pkl", Pickle().op('}').done()}, {"archive/data.pkl", {}}});
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "two entries named 'archive/data.pkl'");
}

// Entries over one region of the file would have its CRC checked once per entry (1400
// entries over 10 MB took 74 s): entries that share bytes are refused.
TEST(TorchMalformed, OverlappingZipEntriesAreRefused) {
  const std::vector<std::byte> data(64, std::byte{7});
  auto archive = make_zip({{"archive/a", data}, {"archive/b", data}});
  // Entry a's sizes (local header bytes 18-25, central record bytes 20-27) grown to cover b's
  // local header (30 bytes and its name) and data.
  const std::uint64_t grown = data.size() + 30 + std::string_view("archive/b").size() + data.size();
  const std::size_t central = archive.size() - 22 - 2 * (46 + std::string_view("archive/a").size());
  for (const std::size_t at : {std::size_t{18}, std::size_t{22}, central + 20, central + 24})
    for (int i = 0; i < 4; ++i) archive[at + i] = static_cast<std::byte>((grown >> (8 * i)) & 0xffu);
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "zip entries 'archive/a' (bytes [0, ", "and 'archive/b'", "overlap");
}

// Names count against the size budget: 4000 dicts under one long key (written once, then
// fetched from the pickle's memo) would make 4000 long names from a small file.
TEST(TorchMalformed, ManyLongNamesHitTheSizeLimit) {
  Pickle pickle;
  pickle.op('}').op('(');
  const std::string key(64 << 10, 'k');
  for (int i = 0; i < 4000; ++i) {
    pickle.str(fmt::format("d{}", i)).op('}');
    if (i == 0) pickle.str(key).raw("q\x01");  // BINPUT 1
    else pickle.raw("h\x01");                  // BINGET 1
    pickle.op('}').op('s');
  }
  pickle.op('u');
  const auto archive = torch_archive(pickle.done());
  EXPECT_LT(archive.size(), std::size_t{1} << 20);
  EXPECT_KILN_ERROR(load(archive, {.skip_non_tensors = true}), "bad.pt: the names of its entries",
                    "likely decompression bomb");
}

TEST(TorchMalformed, CorruptZipDirectory) {
  auto archive = torch_archive(Pickle().op('}').done());
  // The end record's directory offset (its bytes 16-19) pointing elsewhere.
  archive[archive.size() - 6] ^= std::byte{0x01};
  EXPECT_KILN_ERROR(load(archive), "bad.pt", "central directory");
}

// The worst .pt files of at most 1 MiB: each is refused, or read within 1 s and 100 MiB.
TEST(TorchMalformed, SmallHostileFilesStayWithinTheBudget) {
  using Outcome = kiln::test::ReadUse::Outcome;
  using kiln::test::expect_within_budget;
  const auto loads = [](const std::vector<std::byte>& archive, TorchLoadOptions options = {}) {
    return [&archive, options] { (void)load(archive, options); };
  };
  // 4000 dicts under one 64 KiB key (fetched from the memo): 256 MB of names.
  Pickle names;
  names.op('}').op('(');
  for (int i = 0; i < 4000; ++i) {
    names.str(fmt::format("d{}", i)).op('}');
    if (i == 0) names.str(std::string(64 << 10, 'k')).raw("q\x01");
    else names.raw("h\x01");
    names.op('}').op('s');
  }
  const auto many_names = torch_archive(names.op('u').done());
  expect_within_budget(".pt: 4000 dicts under one 64 KiB key", many_names.size(), Outcome::refused,
                       loads(many_names, {.skip_non_tensors = true}), "decompression bomb");
  // One tensor of 512 KiB under n names: 20 MiB is read, 256 MiB is refused.
  for (const int n : {40, 512}) {
    Pickle pickle;
    pickle.op('}').op('(').str("t0").tensor("FloatStorage", "0", 1 << 17, 0, {1 << 17}, {1}).raw("q\x07"sv);
    for (int i = 1; i < n; ++i) pickle.str(fmt::format("t{}", i)).raw("h\x07"sv);
    const auto archive = torch_archive(pickle.op('u').done(), {{"0", std::vector<std::byte>(1 << 19)}});
    expect_within_budget(fmt::format(".pt: a 512 KiB tensor under {} names", n), archive.size(),
                         n == 40 ? Outcome::read : Outcome::refused, loads(archive));
  }
  // One float expanded to 1 GiB.
  const auto expanded = one_tensor(
      [](Pickle& p) { p.tensor("FloatStorage", "0", 1, 0, {4096, 4096, 16}, {0, 0, 0}); }, raw_bytes<float>({1}));
  expect_within_budget(".pt: one float expanded to 1 GiB", expanded.size(), Outcome::refused, loads(expanded),
                       "decompression bomb");
  // A pickle of 1 MiB of EMPTY_LIST opcodes: a million values on the stack.
  Pickle lists;
  lists.raw(std::string((1 << 20) - 256, ']'));
  const auto stacked = torch_archive(lists.done());
  expect_within_budget(".pt: a million empty lists on the pickle stack", stacked.size(), Outcome::refused,
                       loads(stacked));
  // A pickle of 1 MiB of one nested list after another ('(' MARK then ']' ... 'e').
  Pickle marks;
  marks.raw(std::string((1 << 19) - 128, '('));
  const auto marked = torch_archive(marks.done());
  expect_within_budget(".pt: half a million marks", marked.size(), Outcome::refused, loads(marked));
  // 16000 zip entries (1 MiB of directory) beside the pickle.
  std::vector<std::pair<std::string, std::vector<std::byte>>> entries{{"archive/data.pkl", Pickle().op('}').done()}};
  for (int i = 0; i < 9000; ++i) entries.emplace_back(fmt::format("archive/x/{:05}", i), std::vector<std::byte>{});
  const auto directory = make_zip(entries);
  expect_within_budget(".pt: 9000 empty zip entries", directory.size(), Outcome::read, loads(directory));
}

}  // namespace
}  // namespace kiln::store::test

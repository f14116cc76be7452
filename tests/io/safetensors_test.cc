#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "io_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A safetensors image built by hand (not by our writer): little-endian u64
// header length, the header text verbatim, then `data_bytes` bytes 0, 1, 2...
std::string RawImage(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i & 0xff));
  return out;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void ExpectParseError(const std::string& image, StatusCode code, std::initializer_list<std::string> needles) {
  auto r = testing::ParseSafetensorsImage(image);
  testing::ExpectTaggedError("[safetensors]", r.status(), code, needles);
}

constexpr DType kAllDTypes[] = {DType::kF64,  DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3,
                                DType::kF8E5M2, DType::kU8, DType::kI8,  DType::kU16,  DType::kI16,
                                DType::kU32,  DType::kI32, DType::kU64, DType::kI64,  DType::kBool};

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// ---------------------------------------------------------------- writer

TEST(Safetensors, RoundTripsEveryDType) {
  SafetensorsWriter w;
  std::map<std::string, std::string> expected_bytes;
  uint32_t seed = 1;
  for (DType t : kAllDTypes) {
    const std::string name = "t." + std::string(DTypeName(t));
    const std::vector<int64_t> shape = {3, 5};
    std::string bytes = RandomBytes(15 * DTypeSize(t), seed++);
    w.Add(name, t, shape, bytes.data(), bytes.size());
    expected_bytes[name] = bytes;
  }
  const float scalar = 2.5f;
  w.AddF32("scalar", {}, &scalar);
  w.AddI32("empty", {4, 0}, nullptr);
  const int32_t ids[3] = {7, -1, 1 << 30};
  w.AddI32("ids", {3}, ids);
  w.SetMetadata("format", "pt");

  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/all.safetensors";
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_EQ(ReadBytes(path), w.Serialize());
  auto r = SafetensorsFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SafetensorsFile& f = **r;
  EXPECT_EQ(f.tensors().size(), std::size(kAllDTypes) + 3);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  for (DType t : kAllDTypes) {
    const std::string name = "t." + std::string(DTypeName(t));
    const TensorInfo* info = f.Find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, t);
    EXPECT_EQ(info->shape, (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(info->numel(), 15);
    ASSERT_EQ(info->nbytes, 15 * DTypeSize(t));
    EXPECT_EQ(std::memcmp(info->data, expected_bytes[name].data(), info->nbytes), 0) << name;
  }
  const TensorInfo* s = f.Find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numel(), 1);
  float got;
  std::memcpy(&got, s->data, 4);
  EXPECT_EQ(got, 2.5f);
  const TensorInfo* e = f.Find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 0u);
  EXPECT_EQ(e->numel(), 0);
  const TensorInfo* i = f.Find("ids");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->Describe(), "[3] I32");
  EXPECT_EQ(std::memcmp(i->data, ids, sizeof(ids)), 0);
  EXPECT_EQ(f.Find("absent"), nullptr);
  // tensors() is in data-offset order.
  for (size_t k = 1; k < f.tensors().size(); ++k)
    EXPECT_LE(f.tensors()[k - 1].data, f.tensors()[k].data);
}

TEST(Safetensors, WriterHeaderIsOrderedPaddedAndContiguous) {
  SafetensorsWriter w;
  const std::vector<float> a = testing::RandomFloats(3, 1);
  const std::vector<float> b = testing::RandomFloats(2, 2);
  w.AddF32("zeta", {3}, a.data());  // inserted first despite sorting last
  w.AddF32("alpha", {2}, b.data());
  w.SetMetadata("k", "v");
  const std::string image = w.Serialize();
  EXPECT_EQ(image, w.Serialize());  // deterministic

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(image[i]);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-byte aligned";
  ASSERT_EQ(image.size(), 8 + n + 20);
  const std::string header = image.substr(8, n);
  EXPECT_LT(header.find("__metadata__"), header.find("zeta"));
  EXPECT_LT(header.find("zeta"), header.find("alpha"));
  const json h = json::parse(header);  // trailing space padding is valid JSON
  EXPECT_EQ(h["zeta"]["data_offsets"], json({0, 12}));
  EXPECT_EQ(h["alpha"]["data_offsets"], json({12, 20}));
  EXPECT_EQ(h["alpha"]["dtype"], "F32");
  EXPECT_EQ(h["__metadata__"]["k"], "v");
  EXPECT_EQ(std::memcmp(image.data() + 8 + n, a.data(), 12), 0);
  EXPECT_EQ(std::memcmp(image.data() + 8 + n + 12, b.data(), 8), 0);
}

TEST(Safetensors, StreamingWriterMatchesInMemoryWriter) {
  const std::vector<TensorDecl> decls = {
      {"w.bf16", DType::kBF16, {4, 6}},
      {"w.u8", DType::kU8, {7}},
      {"w.empty", DType::kF32, {0, 3}},
      {"w.f64", DType::kF64, {2, 2}},
  };
  auto fill = [](size_t i, uint8_t* out, size_t n) {
    for (size_t k = 0; k < n; ++k) out[k] = static_cast<uint8_t>(31 * i + 7 * k + 1);
  };
  SafetensorsWriter w;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < decls.size(); ++i) {
    size_t n = DTypeSize(decls[i].dtype);
    for (int64_t d : decls[i].shape) n *= static_cast<size_t>(d);
    sizes.push_back(n);
    std::vector<uint8_t> buf(n);
    fill(i, buf.data(), n);
    w.Add(decls[i].name, decls[i].dtype, decls[i].shape, buf.data(), n);
  }
  w.SetMetadata("producer", "test");

  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/stream.safetensors";
  std::vector<size_t> order;
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  Status s = WriteSafetensorsStreaming(
      path, decls, [&](size_t i, uint8_t* out, size_t n) { order.push_back(i), fill(i, out, n); },
      {{"producer", "test"}}, [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
  // After each tensor: the data bytes so far, of all the tensors' bytes.
  const uint64_t all = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  std::vector<std::pair<uint64_t, uint64_t>> expected;
  uint64_t sum = 0;
  for (uint64_t n : sizes) expected.emplace_back(sum += n, all);
  EXPECT_EQ(progress, expected);
  EXPECT_EQ(ReadBytes(path), w.Serialize());
  // Only the final file remains: the temporary was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  auto r = SafetensorsFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TensorInfo* t = (*r)->Find("w.bf16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Describe(), "[4, 6] BF16");
  EXPECT_EQ(t->data[5], static_cast<uint8_t>(7 * 5 + 1));
}

TEST(Safetensors, StreamingWriterRejectsBadDecls) {
  const std::string dir = testing::MakeTempDir();
  auto nop = [](size_t, uint8_t*, size_t) {};
  Status s = WriteSafetensorsStreaming(dir + "/a.safetensors", {{"x", DType::kF32, {2, -1}}}, nop);
  testing::ExpectTaggedError("[safetensors]", s, StatusCode::kInvalidArgument, {"'x'", "shape"});
  s = WriteSafetensorsStreaming(dir + "/b.safetensors",
                                {{"x", DType::kF32, {1}}, {"x", DType::kF32, {2}}}, nop);
  testing::ExpectTaggedError("[safetensors]", s, StatusCode::kInvalidArgument, {"'x'", "duplicate"});
  s = WriteSafetensorsStreaming(dir + "/c.safetensors", {{"x", DType::kF64, {1LL << 40, 1LL << 30}}}, nop);
  testing::ExpectTaggedError("[safetensors]", s, StatusCode::kInvalidArgument, {"overflowing"});
  EXPECT_TRUE(fs::is_empty(dir));
}

// ---------------------------------------------------------------- fixture

TEST(Safetensors, ReadsTinyEFixture) {
  const std::string dir = testing::TestDataPath("models/tiny-e");
  auto r = Checkpoint::Open(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Checkpoint& ckpt = **r;

  const json config = json::parse(ReadBytes(dir + "/config.json"));
  const int64_t hidden = config["hidden_size"], vocab = config["vocab_size"];
  const int64_t heads = config["num_attention_heads"], kv_heads = config["num_key_value_heads"];
  const int64_t head_dim = config["head_dim"], inter = config["intermediate_size"];
  const int64_t layers = config["num_hidden_layers"];
  const int64_t full_head_dim = config["per_layer_config"]["3"]["head_dim"];

  const TensorInfo* embed = ckpt.Find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->Describe(), "[512, 128] F32");
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{vocab, hidden}));
  auto shape_of = [&](const std::string& name) {
    const TensorInfo* t = ckpt.Find(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{heads * head_dim, hidden}));
  EXPECT_EQ(shape_of("model.layers.0.self_attn.k_proj.weight"),
            (std::vector<int64_t>{kv_heads * head_dim, hidden}));
  EXPECT_EQ(shape_of("model.layers.3.self_attn.q_proj.weight"),
            (std::vector<int64_t>{heads * full_head_dim, hidden}));
  EXPECT_EQ(shape_of("model.layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{inter, hidden}));
  EXPECT_EQ(shape_of("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{hidden, inter}));
  EXPECT_NE(ckpt.Find("model.layers." + std::to_string(layers - 1) + ".input_layernorm.weight"), nullptr);
  EXPECT_EQ(ckpt.Find("model.layers." + std::to_string(layers) + ".input_layernorm.weight"), nullptr);

  // Cross-check against an independent reading of the raw file.
  const std::string file = dir + "/model.safetensors";
  const std::string raw = ReadBytes(file);
  EXPECT_EQ(ckpt.total_file_bytes(), raw.size());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  json header = json::parse(raw.substr(8, n));
  header.erase("__metadata__");
  const std::vector<std::string> names = ckpt.Names();
  ASSERT_EQ(names.size(), header.size());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& name : names) {
    const TensorInfo* t = ckpt.Find(name);
    ASSERT_NE(t, nullptr);
    const json& h = header.at(name);
    EXPECT_EQ(std::string(DTypeName(t->dtype)), h["dtype"].get<std::string>()) << name;
    EXPECT_EQ(t->shape, h["shape"].get<std::vector<int64_t>>()) << name;
    const uint64_t begin = h["data_offsets"][0], end = h["data_offsets"][1];
    ASSERT_EQ(t->nbytes, end - begin) << name;
    EXPECT_EQ(std::memcmp(t->data, raw.data() + 8 + n + begin, t->nbytes), 0) << name;
  }
}

// ---------------------------------------------------------------- sharded

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    a_ = testing::RandomFloats(6, 11);
    b_ = testing::RandomFloats(4, 12);
    c_ = testing::RandomFloats(2, 13);
    SafetensorsWriter s1, s2;
    s1.AddF32("model.a", {2, 3}, a_.data());
    s1.AddF32("model.b", {4}, b_.data());
    s2.AddF32("model.c", {1, 2}, c_.data());
    ASSERT_TRUE(s1.Write(dir_ + "/model-00001-of-00002.safetensors").ok());
    ASSERT_TRUE(s2.Write(dir_ + "/model-00002-of-00002.safetensors").ok());
  }
  void WriteIndex(const json& weight_map) {
    json index = {{"metadata", {{"total_size", 48}}}, {"weight_map", weight_map}};
    testing::WriteFileBytes(dir_ + "/model.safetensors.index.json", index.dump(2));
  }
  static json GoodMap() {
    return {{"model.a", "model-00001-of-00002.safetensors"},
            {"model.b", "model-00001-of-00002.safetensors"},
            {"model.c", "model-00002-of-00002.safetensors"}};
  }
  std::string dir_;
  std::vector<float> a_, b_, c_;
};

TEST_F(ShardedCheckpoint, OpensAllShards) {
  WriteIndex(GoodMap());
  // A stray model.safetensors must be ignored when an index exists.
  testing::WriteFileBytes(dir_ + "/model.safetensors", "garbage");
  auto r = Checkpoint::Open(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Checkpoint& ckpt = **r;
  EXPECT_EQ(ckpt.Names(), (std::vector<std::string>{"model.a", "model.b", "model.c"}));
  EXPECT_EQ(ckpt.total_file_bytes(), fs::file_size(dir_ + "/model-00001-of-00002.safetensors") +
                                         fs::file_size(dir_ + "/model-00002-of-00002.safetensors"));
  const TensorInfo* c = ckpt.Find("model.c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::memcmp(c->data, c_.data(), 8), 0);
  const TensorInfo* a = ckpt.Find("model.a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(std::memcmp(a->data, a_.data(), 24), 0);
  EXPECT_EQ(ckpt.Find("model.d"), nullptr);
}

TEST_F(ShardedCheckpoint, MissingShard) {
  json map = GoodMap();
  map["model.c"] = "model-00003-of-00002.safetensors";
  WriteIndex(map);
  auto r = Checkpoint::Open(dir_);
  testing::ExpectTaggedError("[safetensors]", r.status(), StatusCode::kNotFound,
                             {"model-00003-of-00002.safetensors", "missing"});
}

TEST_F(ShardedCheckpoint, IndexNamesTensorAbsentFromShard) {
  json map = GoodMap();
  map["model.c"] = "model-00001-of-00002.safetensors";
  WriteIndex(map);
  auto r = Checkpoint::Open(dir_);
  testing::ExpectTaggedError("[safetensors]", r.status(), StatusCode::kCorrupt,
                         {"'model.c'", "model-00001-of-00002.safetensors", "not contain"});
}

TEST_F(ShardedCheckpoint, WeightMapMissingOrWrongType) {
  testing::WriteFileBytes(dir_ + "/model.safetensors.index.json", R"({"metadata": {}})");
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                             {"weight_map", "missing"});
  WriteIndex(json::array({"model.a"}));
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                             {"weight_map", "not an object"});
  WriteIndex({{"model.a", 3}});
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                             {"'model.a'", "not a shard file name"});
  testing::WriteFileBytes(dir_ + "/model.safetensors.index.json", "{\"weight_map\": ");
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                             {"index.json", "not valid JSON"});
}

TEST_F(ShardedCheckpoint, ShardNameMustStayInDirectory) {
  WriteIndex({{"model.a", "../model-00001-of-00002.safetensors"}});
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                             {"not a file name"});
}

TEST_F(ShardedCheckpoint, CorruptShardIsReported) {
  WriteIndex(GoodMap());
  testing::WriteFileBytes(dir_ + "/model-00002-of-00002.safetensors", "1234");
  testing::ExpectTaggedError("[safetensors]", Checkpoint::Open(dir_).status(), StatusCode::kCorrupt,
                         {"model-00002-of-00002.safetensors", "shorter"});
}

TEST(Checkpoint, MissingDirectoryIsNotFound) {
  const std::string dir = testing::MakeTempDir() + "/no-such-model";
  auto r = Checkpoint::Open(dir);
  testing::ExpectTaggedError("[safetensors]", r.status(), StatusCode::kNotFound, {dir, "no such directory"});
}

TEST(Checkpoint, EmptyDirectoryIsNotFound) {
  const std::string dir = testing::MakeTempDir();
  auto r = Checkpoint::Open(dir);
  testing::ExpectTaggedError("[safetensors]", r.status(), StatusCode::kNotFound, {dir, "model.safetensors"});
}

TEST(Safetensors, OpenMissingFileIsNotFound) {
  const std::string path = testing::MakeTempDir() + "/absent.safetensors";
  testing::ExpectTaggedError("[safetensors]", SafetensorsFile::Open(path).status(), StatusCode::kNotFound, {path});
}

// ---------------------------------------------------------------- corruption

const char kGoodEntry[] = R"("t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]})";

TEST(SafetensorsCorrupt, HandBuiltGoodImageParses) {
  // The baseline the corruption tests below perturb.
  const std::string image = RawImage(std::string("{") + kGoodEntry + "}", 24);
  auto r = testing::ParseSafetensorsImage(image);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Find("t")->Describe(), "[2, 3] F32");
  EXPECT_EQ((*r)->label(), "test.st");
}

TEST(SafetensorsCorrupt, TruncatedFile) {
  ExpectParseError("", StatusCode::kCorrupt, {"test.st", "0 bytes", "shorter than"});
  ExpectParseError(std::string("\x10\0\0", 3), StatusCode::kCorrupt, {"3 bytes", "shorter than"});
}

TEST(SafetensorsCorrupt, HeaderLengthPastEnd) {
  std::string image = RawImage("{}", 0);
  image[0] = 100;  // claims 100 header bytes, only 2 follow
  ExpectParseError(image, StatusCode::kCorrupt, {"header length 100", "past end of file", "size 10"});
  std::string huge(8, '\xff');
  ExpectParseError(huge + "{}", StatusCode::kCorrupt, {"header length 18446744073709551615", "past end"});
}

TEST(SafetensorsCorrupt, HeaderNotJson) {
  ExpectParseError(RawImage("{\"t\": ", 0), StatusCode::kCorrupt, {"not valid JSON"});
  ExpectParseError(RawImage("", 0), StatusCode::kCorrupt, {"not valid JSON"});
  ExpectParseError(RawImage("\xff\xfe", 0), StatusCode::kCorrupt, {"not valid JSON"});
}

TEST(SafetensorsCorrupt, HeaderNotObject) {
  ExpectParseError(RawImage("[1, 2]", 0), StatusCode::kCorrupt, {"array", "not an object"});
  ExpectParseError(RawImage(R"({"t": 5})", 0), StatusCode::kCorrupt, {"'t'", "not an object"});
}

TEST(SafetensorsCorrupt, MissingFields) {
  ExpectParseError(RawImage(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4), StatusCode::kCorrupt,
                   {"'t'", "missing \"dtype\""});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), StatusCode::kCorrupt,
                   {"'t'", "missing \"shape\""});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [1]}})", 4), StatusCode::kCorrupt,
                   {"'t'", "missing \"data_offsets\""});
}

TEST(SafetensorsCorrupt, WrongFieldTypes) {
  ExpectParseError(RawImage(R"({"t": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4),
                   StatusCode::kCorrupt, {"\"dtype\" is a number"});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4),
                   StatusCode::kCorrupt, {"\"shape\" is a string"});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
                   StatusCode::kCorrupt, {"1.5", "not an integer"});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
                   StatusCode::kCorrupt, {"data_offsets", "[0]"});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
                   StatusCode::kCorrupt, {"data_offsets", "non-negative"});
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": {"a": 1}}})", 4),
                   StatusCode::kCorrupt, {"data_offsets"});
}

TEST(SafetensorsCorrupt, UnknownDType) {
  ExpectParseError(RawImage(R"({"t": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", 1),
                   StatusCode::kUnsupported, {"'t'", "unknown dtype 'F4'"});
}

TEST(SafetensorsCorrupt, NegativeDimension) {
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 24]}})", 24),
                   StatusCode::kCorrupt, {"'t'", "negative dimension -3"});
}

TEST(SafetensorsCorrupt, ShapeProductOverflow) {
  ExpectParseError(
      RawImage(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4),
      StatusCode::kCorrupt, {"'t'", "overflows"});
  // Fits as an element count but not once multiplied by 8 bytes each.
  ExpectParseError(
      RawImage(R"({"t": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 8]}})", 8),
      StatusCode::kCorrupt, {"'t'", "overflows"});
  ExpectParseError(
      RawImage(R"({"t": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", 8),
      StatusCode::kCorrupt, {"'t'", "overflows"});
}

TEST(SafetensorsCorrupt, OffsetsBeginAfterEnd) {
  ExpectParseError(RawImage(R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [8, 4]}})", 8),
                   StatusCode::kCorrupt, {"'t'", "[8, 4]", "begin > end"});
}

TEST(SafetensorsCorrupt, OffsetsOutOfBounds) {
  ExpectParseError(RawImage(std::string("{") + kGoodEntry + "}", 20), StatusCode::kCorrupt,
                   {"'t'", "[0, 24]", "past end of data section (20 bytes)"});
  ExpectParseError(
      RawImage(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 18446744073709551615]}})",
               4),
      StatusCode::kCorrupt, {"'t'", "past end of data section"});
}

TEST(SafetensorsCorrupt, OverlappingOffsets) {
  ExpectParseError(RawImage(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})",
                            20),
                   StatusCode::kCorrupt, {"'a'", "'b'", "overlap"});
  // Containment, listed in reverse order: the big range still catches the small one.
  ExpectParseError(RawImage(R"({"small": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]},
                                "mid": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
                                "big": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}})",
                            16),
                   StatusCode::kCorrupt, {"'big'", "overlap"});
}

TEST(SafetensorsCorrupt, ShapeDisagreesWithBytes) {
  ExpectParseError(RawImage(R"({"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24),
                   StatusCode::kCorrupt, {"'t'", "[2, 3] F32", "needs 24 bytes", "span 20"});
}

TEST(SafetensorsCorrupt, MetadataMustBeStringMap) {
  ExpectParseError(RawImage(R"({"__metadata__": {"format": 1}})", 0), StatusCode::kCorrupt,
                   {"__metadata__", "'format'", "not a string"});
  ExpectParseError(RawImage(R"({"__metadata__": ["pt"]})", 0), StatusCode::kCorrupt,
                   {"__metadata__", "not an object"});
}

TEST(SafetensorsCorrupt, DuplicateTensorName) {
  ExpectParseError(RawImage(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                "t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                            2),
                   StatusCode::kCorrupt, {"'t'", "twice"});
}

TEST(SafetensorsPolicy, HolesAndEmptyTensorsAreAccepted) {
  // Gap [4, 8) between tensors and 4 trailing bytes; two empty tensors share
  // an offset inside another tensor's range (they own no bytes).
  // The parsed file borrows the image, so it must outlive `r`.
  const std::string image = RawImage(R"({"b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]},
                                         "a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},
                                         "e1": {"dtype": "F32", "shape": [0], "data_offsets": [9, 9]},
                                         "e2": {"dtype": "F32", "shape": [3, 0], "data_offsets": [9, 9]},
                                         "__metadata__": {"format": "pt"}})",
                                     16);
  auto r = testing::ParseSafetensorsImage(image);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SafetensorsFile& f = **r;
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // offset order, not header order
  EXPECT_EQ(f.Find("b")->data[0], 8);   // RawImage data bytes count 0, 1, 2, ...
  EXPECT_EQ(f.Find("e2")->nbytes, 0u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(SafetensorsPolicy, HeaderPaddingAndNegativeZero) {
  // Writers pad with spaces; "-0" is an odd but valid zero.
  const std::string image =
      RawImage(R"({"t": {"dtype": "U8", "shape": [-0, 2], "data_offsets": [0, -0]}}       )", 0);
  auto r = testing::ParseSafetensorsImage(image);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Find("t")->numel(), 0);
}

}  // namespace
}  // namespace g4

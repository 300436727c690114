// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/io/safetensors.hpp>
#include <gpucmp/io/safetensors_writer.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {
// A safetensors file: the 8-byte little-endian header length, the header, the data.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string bytes_of(const std::vector<float>& values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(&s[0], values.data(), s.size());
  return s;
}

std::string bytes_of(const std::vector<std::uint16_t>& values) {
  std::string s(values.size() * 2, '\0');
  std::memcpy(&s[0], values.data(), s.size());
  return s;
}

const std::string valid_header =
    R"({"__metadata__": {"format": "pt"},
        "fc.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "fc.bias": {"dtype": "F16", "shape": [2], "data_offsets": [16, 20]},
        "bn.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [20, 24]}})";
// F16 1.0 = 0x3C00, -2.0 = 0xC000; BF16 0.5 = 0x3F00, 3.0 = 0x4040.
const std::string valid_data = bytes_of(std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f}) + bytes_of(std::vector<std::uint16_t>{0x3C00, 0xC000}) +
                               bytes_of(std::vector<std::uint16_t>{0x3F00, 0x4040});
}  // namespace

TEST_CASE("tensors are read as float from F32, F16 and BF16", "[safetensors]") {
  const auto f = gpucmp::safetensors_file::parse(file_of(valid_header, valid_data), "weights.safetensors");
  REQUIRE(f.tensors().size() == 3);
  CHECK(f.tensors()[0].name == "fc.weight");  // in data order
  CHECK(f.read_float("fc.weight", {2, 2}) == std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f});
  CHECK(f.read_float("fc.bias", {2}) == std::vector<float>{1.0f, -2.0f});
  CHECK(f.read_float("bn.weight", {2}) == std::vector<float>{0.5f, 3.0f});
}

TEST_CASE("every malformed weight file names the file, the tensor and the problem", "[safetensors]") {
  auto error_of = [](const std::string& bytes) {
    try {
      gpucmp::safetensors_file::parse(bytes, "w.safetensors");
    } catch (const gpucmp::weight_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("abc") == "w.safetensors: truncated: 3 bytes, but a safetensors file starts with an 8-byte header length");
  CHECK_THAT(error_of(file_of(valid_header, valid_data).substr(0, 40)), GPUCMP_CONTAINS("header length"));
  CHECK_THAT(error_of(file_of("{\"a\": ", "")), GPUCMP_CONTAINS("w.safetensors: malformed header: line 1"));
  CHECK_THAT(error_of(file_of(valid_header, valid_data.substr(0, 22))),
             GPUCMP_CONTAINS("tensor 'bn.weight': data ends at byte 24 but the file holds only 22 bytes of data (truncated)"));
  CHECK_THAT(error_of(file_of(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, '\0'))),
             GPUCMP_CONTAINS("tensor 'x': F32 [3] needs 12 bytes, its data_offsets span 8"));
  CHECK_THAT(error_of(file_of(R"({"x": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", "a")),
             GPUCMP_CONTAINS("tensor 'x': unknown dtype 'Q4'"));
  CHECK_THAT(error_of(file_of(R"({"x": {"dtype": "F32", "shape": [1]}})", "")),
             GPUCMP_CONTAINS("tensor 'x': header entry needs dtype, shape and two data_offsets"));
  CHECK_THAT(error_of(file_of(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                  "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", "abcdef")),
             GPUCMP_CONTAINS("tensors 'a' and 'b' overlap"));
}

TEST_CASE("holes in the data section and repeated tensor names are refused, as the format says", "[safetensors]") {
  auto error_of = [](const std::string& header, const std::string& data) {
    try {
      gpucmp::safetensors_file::parse(file_of(header, data), "w.safetensors");
    } catch (const gpucmp::weight_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Between two tensors, before the first, after the last.
  CHECK(error_of(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                     "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})", "abcdef") ==
        "w.safetensors: bytes 2 to 4 of the data section, before tensor 'b', belong to no tensor (the format allows no holes)");
  CHECK_THAT(error_of(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})", "abc"),
             GPUCMP_CONTAINS("bytes 0 to 1 of the data section, before tensor 'a'"));
  CHECK(error_of(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "abcd") ==
        "w.safetensors: bytes 2 to 4 of the data section, after the last tensor, belong to no tensor (the format allows no holes)");
  CHECK_THAT(error_of("{}", "x"), GPUCMP_CONTAINS("bytes 0 to 1 of the data section, after the last tensor"));
  // A repeated name would leave one of its two entries unread.
  CHECK_THAT(error_of(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                          "a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}})", "abcd"),
             GPUCMP_CONTAINS("w.safetensors: malformed header: ") && GPUCMP_CONTAINS("duplicate member name 'a'"));
  // Empty tensors take no bytes wherever they sit; an empty file with no tensors is whole.
  const auto f = gpucmp::safetensors_file::parse(
      file_of(R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},
                  "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                  "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}})", "abc"), "ok.safetensors");
  CHECK(f.tensors().size() == 3);
  CHECK(gpucmp::safetensors_file::parse(file_of("{}", ""), "none.safetensors").tensors().empty());
}

TEST_CASE("a missing tensor, a wrong shape and a non-float dtype are named", "[safetensors]") {
  const auto f = gpucmp::safetensors_file::parse(file_of(valid_header, valid_data), "resnet50.safetensors");
  CHECK_THROWS_WITH(f.find("conv1.weight"), "resnet50.safetensors: tensor 'conv1.weight' is missing");
  CHECK_THROWS_WITH(f.read_float("fc.weight", {2, 3}),
                    "resnet50.safetensors: tensor 'fc.weight' has shape [2, 2], expected [2, 3]");
  const auto ints = gpucmp::safetensors_file::parse(
      file_of(R"({"steps": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}})", std::string(8, '\0')), "opt.safetensors");
  CHECK_THROWS_WITH(ints.read_float("steps", {}), "opt.safetensors: tensor 'steps' is I64; weights must be F32, F16 or BF16");
  CHECK_THROWS_WITH(gpucmp::safetensors_file::open("/nonexistent/w.safetensors"),
                    "/nonexistent/w.safetensors: cannot open the weight file");
}

TEST_CASE("shapes and offsets past what a file can hold are refused, not wrapped", "[safetensors][fuzz]") {
  // 2^32 x 2^32 elements would wrap a 64-bit count to 0 and match empty data_offsets.
  const std::string wrap = R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})";
  CHECK_THROWS_WITH(gpucmp::safetensors_file::parse(file_of(wrap, ""), "w.safetensors"),
                    GPUCMP_CONTAINS("has more elements than any file can hold"));
  // A double too large for an integer is undefined behaviour to convert: refused first.
  const std::string huge = R"({"t": {"dtype": "U8", "shape": [1e300], "data_offsets": [0, 1e300]}})";
  CHECK_THROWS_WITH(gpucmp::safetensors_file::parse(file_of(huge, ""), "h.safetensors"),
                    GPUCMP_CONTAINS("shape must hold non-negative integers up to 2^53"));
  const std::string far = R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [1e30, 1e30]}})";
  CHECK_THROWS_WITH(gpucmp::safetensors_file::parse(file_of(far, ""), "f.safetensors"),
                    GPUCMP_CONTAINS("data_offsets must be two increasing non-negative integers"));
}

TEST_CASE("written tensors read back exactly, and bad tensors are refused by name", "[safetensors]") {
  const std::vector<gpucmp::named_tensor> tensors{{"conv1.weight", {2, 1, 2, 2}, {1.5f, -2, 3, 4, 5, 6, 7, -8.25f}},
                                                  {"fc.bias", {3}, {0.1f, 0.2f, 0.3f}},
                                                  {"empty", {0}, {}}};
  const gpucmp::safetensors_file f = gpucmp::safetensors_file::parse(gpucmp::safetensors_bytes(tensors), "written");
  REQUIRE(f.tensors().size() == 3);
  CHECK(f.read_float("conv1.weight", {2, 1, 2, 2}) == tensors[0].values);
  CHECK(f.read_float("fc.bias", {3}) == tensors[1].values);
  CHECK(f.find("empty").element_count() == 0);
  CHECK(f.read_float("empty", {0}).empty());  // no memcpy from or to an empty vector (a fuzzer find)
  CHECK_THROWS_WITH(gpucmp::safetensors_bytes({{"a", {2}, {1}}}), GPUCMP_CONTAINS("'a' has 1 values for shape"));
  CHECK_THROWS_WITH(gpucmp::safetensors_bytes({{"a", {1}, {1}}, {"a", {1}, {2}}}), GPUCMP_CONTAINS("two tensors are named 'a'"));
  CHECK_THROWS_WITH(gpucmp::safetensors_bytes({{"a\"b", {1}, {1}}}), GPUCMP_CONTAINS("quote"));
  CHECK_THROWS_AS(gpucmp::write_safetensors("/nonexistent-dir/x.safetensors", tensors), gpucmp::error);
}

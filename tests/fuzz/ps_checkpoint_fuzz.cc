// libFuzzer target: the checkpoint readers. Input byte 0 picks what the rest is:
//   even: a part file (table_file.h), opened and loaded into a sparse and a dense table; with
//         bit 1 set the harness first writes the body's CRC into the header, so that mutations
//         reach the record parser instead of stopping at the checksum; with bit 2 set the
//         part is opened to be checked while reading (a restore's path): the sparse table is
//         emptied first, so that unchecked records reach it, and the dense table checks the
//         part whole before it reads a block;
//   odd:  a manifest (checkpoint.h), read and checked against a real checkpoint made at start-up
//         in a scratch directory (save id "seed", whose parts the seed manifests name).
// Any error is fine; a crash, a sanitizer report, a hang or an allocation sized by the input is
// a finding. FLEET_FUZZ_WRITE_SEEDS=<dir> writes that checkpoint's manifest and parts there, as
// seeds for the corpus (tests/fuzz/corpus/ps_checkpoint).

#include <google/protobuf/stubs/logging.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ps/server/detail/table_set.h"
#include "ps/table/checkpoint.h"
#include "ps/table/table_file.h"

namespace {

using namespace fleet::ps;  // NOLINT: a test harness
namespace fs = std::filesystem;

std::string* scratch = nullptr;
std::unique_ptr<detail::TableSet>* tables = nullptr;

proto::ServerConfig Config() {
  proto::ServerConfig config;
  config.set_num_servers(1);
  proto::TableConfig* sparse = config.add_tables();
  sparse->set_table_id(1);
  sparse->set_type(proto::SPARSE);
  sparse->set_dim(4);
  sparse->set_num_shards(2);
  sparse->mutable_optimizer()->set_learning_rate(0.1f);
  sparse->mutable_optimizer()->mutable_sgd();
  proto::TableConfig* dense = config.add_tables();
  dense->set_table_id(2);
  dense->set_type(proto::DENSE);
  dense->set_dim(40);
  dense->set_dense_block_size(16);
  dense->mutable_optimizer()->set_learning_rate(0.1f);
  dense->mutable_optimizer()->mutable_sgd();
  return config;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// The seed checkpoint: a few rows of each table, saved and committed under save id "seed".
void MakeCheckpoint(const std::string& dir) {
  std::vector<int64_t> keys = {-3, 0, 7, 1LL << 40};
  std::vector<float> out(keys.size() * 4);
  auto* sparse = *(*tables)->Sparse(1);
  (void)sparse->Pull(keys, absl::MakeSpan(out));
  (void)sparse->Pull(keys, absl::MakeSpan(out));
  auto files = (*tables)->Save(dir, true, 0, proto::BASE, "seed");
  if (!files.ok()) std::abort();
  proto::CommitSaveRequest commit;
  commit.set_dirname(dir);
  commit.set_save_id("seed");
  commit.set_num_servers(1);
  commit.set_write_manifest(true);
  for (auto& f : *files) *commit.add_files() = f;
  if (!(*tables)->CommitSave(commit).ok()) std::abort();
}

void FuzzPart(const uint8_t* data, size_t size, bool fix_crc, bool check_while_reading) {
  std::vector<uint8_t> bytes(data, data + size);
  if (fix_crc && bytes.size() >= sizeof(TableFileHeader)) {
    const uint32_t crc = static_cast<uint32_t>(crc32_z(crc32_z(0, nullptr, 0),
                                                       bytes.data() + sizeof(TableFileHeader),
                                                       bytes.size() - sizeof(TableFileHeader)));
    std::memcpy(bytes.data() + offsetof(TableFileHeader, checksum), &crc, sizeof(crc));
  }
  const std::string path = *scratch + "/part";
  WriteFile(path, bytes.data(), bytes.size());
  for (uint32_t table_id : {1u, 2u}) {
    auto reader =
        TableFileReader::Open(path, check_while_reading ? TableFileReader::Check::kWhileReading
                                                        : TableFileReader::Check::kNow);
    if (!reader.ok()) return;
    TableFileReader* part = reader->get();
    if (check_while_reading && table_id == 1) {
      SparseTable* sparse = *(*tables)->Sparse(1);
      sparse->Clear();
      // A failed load leaves the table as it found it: empty.
      auto loaded = sparse->Load({&part, 1});
      if (!loaded.ok() && sparse->RowCount() != 0) std::abort();
    } else if (table_id == 1) {
      (void)(*(*tables)->Sparse(1))->Load({&part, 1}, [](int64_t) { return true; });
    } else {
      (void)(*(*tables)->Dense(2))->Load({&part, 1});
    }
  }
}

void FuzzManifest(const uint8_t* data, size_t size) {
  WriteFile(*scratch + "/ckpt/" + kManifestName, data, size);
  auto manifest = ReadManifest(*scratch + "/ckpt");
  if (!manifest.ok()) return;
  const proto::ServerConfig config = Config();
  for (const auto& table : config.tables()) {
    (void)CheckedParts(*scratch + "/ckpt", *manifest, table);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/ps_checkpoint_fuzz.XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  // Mutated strings that are not UTF-8 fail to parse, as they should; do not log each one.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  scratch = new std::string(dir);
  std::atexit([] { fs::remove_all(*scratch); });
  tables = new std::unique_ptr<detail::TableSet>(*detail::TableSet::Create(Config(), Sharding()));
  MakeCheckpoint(*scratch + "/ckpt");
  if (const char* seeds = std::getenv("FLEET_FUZZ_WRITE_SEEDS")) {
    // Manifest seeds start with an odd byte, part seeds with 2 (CRC fixed up), 4 (checked as it
    // loads into an empty table) or 0 (as is).
    auto copy = [&](const fs::path& from, const std::string& name, char first) {
      std::ifstream in(from, std::ios::binary);
      std::string bytes(1, first);
      bytes.append(std::istreambuf_iterator<char>(in), {});
      WriteFile(std::string(seeds) + "/" + name, reinterpret_cast<const uint8_t*>(bytes.data()),
                bytes.size());
    };
    copy(fs::path(*scratch) / "ckpt" / kManifestName, "manifest", 1);
    copy(fs::path(*scratch) / "ckpt" / PartPath("seed", 1, 0, 1, false), "sparse_part", 2);
    // The same part loaded into an empty table, its CRC checked as the records load.
    copy(fs::path(*scratch) / "ckpt" / PartPath("seed", 1, 0, 1, false), "sparse_part_restore", 4);
    copy(fs::path(*scratch) / "ckpt" / PartPath("seed", 2, 0, 1, false), "dense_part", 0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    FuzzManifest(data + 1, size - 1);
  } else {
    FuzzPart(data + 1, size - 1, (data[0] & 2) != 0, (data[0] & 4) != 0);
  }
  return 0;
}

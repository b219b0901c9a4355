#pragma once
// The on-disk format of a saved table part: one file per (table, server, save).
//
//   header   TableFileHeader, 72 bytes, little-endian
//   records  row_count times: int64 key, then float32 data
//
// Sparse tables: key = row key; data = value (dim floats) then update-rule state, row_floats
// floats in all. Dense tables: key = block index; data = the block's values then the state of
// that block (the last block is shorter, so the record length follows from dim and block_size).
// checksum is the CRC-32 (zlib's crc32, ISO-HDLC polynomial) of all bytes after the header.
//
// Files are written under a temporary name (<path>.tmp-*) in the same directory and renamed
// when complete, so a reader sees either the whole previous file or the whole new one.
//
// Where part files go in a checkpoint directory, and the manifest that makes the parts of one
// save a unit, is checkpoint.h's business.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fleet::ps {

struct TableFileHeader {
  char magic[8];     // "FLEETPS" and a NUL
  uint32_t version;  // kTableFileVersion
  uint32_t table_id;
  uint32_t table_type;  // proto::TableType
  uint32_t save_mode;   // proto::SaveMode
  uint32_t rule;        // proto::OptimizerConfig::RuleCase of the writer (fixes the state layout)
  uint32_t block_size;  // dense: elements per block; sparse: 0
  uint64_t dim;         // sparse: floats per value; dense: floats of the whole table
  uint64_t row_floats;  // sparse: floats per record after the key; dense: 0 (varies by block)
  uint64_t row_count;
  uint64_t epoch;  // the writer's save cycle; orders delta files
  uint32_t checksum;
  uint32_t reserved;
};
static_assert(sizeof(TableFileHeader) == 72, "the header layout is part of the file format");

inline constexpr uint32_t kTableFileVersion = 1;

// A header with magic and version set and every other field zero.
TableFileHeader NewTableFileHeader();

// Bytes of one record of a sparse part: its int64 key, then row_floats floats.
inline uint64_t SparseRecordBytes(const TableFileHeader& header) {
  return sizeof(int64_t) + header.row_floats * sizeof(float);
}

namespace detail {
class WriteBehind;
}  // namespace detail

// Streams records into `path` through a temporary file. Not thread-safe. A file of more than one
// buffer is written by a thread of its own while the caller packs the next buffer.
class TableFileWriter {
 public:
  // Creates the temporary file. `header.row_count` and `checksum` are filled in by Finish.
  static absl::StatusOr<std::unique_ptr<TableFileWriter>> Open(const std::string& path,
                                                               const TableFileHeader& header);
  ~TableFileWriter();  // removes the temporary file unless Finish succeeded

  absl::Status Append(const void* data, size_t bytes);
  // One record, key then `floats` floats: Append's work without its loop, for the row-by-row
  // writes of a table save (two Appends a row were a fifth of a 10M-row save).
  absl::Status AppendRecord(int64_t key, const float* data, size_t floats) {
    const size_t bytes = sizeof(key) + floats * sizeof(float);
    if (used_ + bytes > kWriteBufferBytes) {
      if (auto s = Flush(); !s.ok()) return s;
      if (bytes > kWriteBufferBytes) {  // a row wider than the buffer: Append splits it
        if (auto s = Append(&key, sizeof(key)); !s.ok()) return s;
        return Append(data, bytes - sizeof(key));
      }
    }
    std::memcpy(buffer_.get() + used_, &key, sizeof(key));
    std::memcpy(buffer_.get() + used_ + sizeof(key), data, bytes - sizeof(key));
    used_ += bytes;
    return absl::OkStatus();
  }
  // Writes the final header, syncs, and renames the file to its final path.
  absl::Status Finish(uint64_t row_count);

 private:
  TableFileWriter(std::string path, std::string temp_path, int fd, const TableFileHeader& header);
  // Checksums the buffer and hands it to the writer thread (started by the first full buffer);
  // `last` writes here when no thread was needed and waits until everything is written.
  absl::Status Flush(bool last = false);
  // write(2) of records, then StartWriteback; on the writer thread when there is one.
  absl::Status WriteOut(const char* data, size_t bytes);
  // Starts the disk write of what was written since the last call once it reaches
  // kWritebackBytes, so that the disk works while the rows are still being packed and Finish's
  // fsync waits only for the tail (a save was its packing time plus the whole flush).
  void StartWriteback();

  std::string path_;
  std::string temp_path_;
  int fd_;
  TableFileHeader header_;
  static constexpr size_t kWriteBufferBytes = size_t{1} << 20;  // records are far smaller
  uint32_t crc_;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0;               // bytes of buffer_ holding records not yet written
  uint64_t written_ = 0;          // bytes of records written to fd_
  uint64_t writeback_begin_ = 0;  // records from here on have no writeback started
  bool finished_ = false;
  std::unique_ptr<detail::WriteBehind> write_behind_;  // before fd_ closes, it is gone
};

// The CRC-32 of the format: `crc` (0 to start) extended by `bytes` bytes of `data`.
uint32_t ExtendCrc(uint32_t crc, const void* data, size_t bytes);
// The CRC of two consecutive byte ranges from their CRCs and the second one's length.
uint32_t CombineCrc(uint32_t first, uint32_t second, uint64_t second_bytes);

// Reads a part file front to back. Not thread-safe.
class TableFileReader {
 public:
  enum class Check {
    kNow,           // Open reads the whole body and compares its CRC with the header's
    kWhileReading,  // the caller computes the CRC of the records as it reads them and calls
                    // CheckContent (or CheckNow) before it relies on them
  };
  // Opens `path` and checks magic and version and, with Check::kNow, that the CRC of the body
  // matches the header (one pass over the file), so that a caller can validate every file
  // before changing a table.
  static absl::StatusOr<std::unique_ptr<TableFileReader>> Open(const std::string& path,
                                                               Check check = Check::kNow);
  ~TableFileReader();

  const TableFileHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // True once the body's CRC was found to match the header's.
  bool checked() const { return checked_; }
  // The pass Open makes with Check::kNow.
  absl::Status CheckNow();
  // DataLoss naming the file unless `crc`, the CRC of the whole body, is the header's.
  absl::Status CheckContent(uint32_t crc);
  // Bytes after the header.
  uint64_t body_bytes() const { return body_bytes_; }
  // Reads exactly `bytes` of the body; DataLoss naming the file when it ends first.
  absl::Status Read(void* out, size_t bytes);
  // Reads exactly `bytes` of the body from `offset` (bytes after the header), leaving Read's
  // position alone. Safe to call from several threads at once (no other member may run then).
  absl::Status ReadAt(uint64_t offset, void* out, size_t bytes) const;

 private:
  TableFileReader(std::string path, int fd, const TableFileHeader& header);
  absl::Status Fill();

  std::string path_;
  int fd_;
  TableFileHeader header_;
  uint64_t body_bytes_ = 0;
  bool checked_ = false;
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

// The header of the part file at `path` (magic and version checked, the body not read):
// NotFound when there is no such file, DataLoss naming it when it is no table file.
absl::StatusOr<TableFileHeader> ReadTableFileHeader(const std::string& path);

}  // namespace fleet::ps

#include "data/file_readers.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/line_stream.h"
#include "data/multislot_parser.h"

namespace fleet::data {
namespace {

constexpr size_t kMaxBadLineExamples = 5;

}  // namespace

void EnterFeedThread(const char* name, ThreadPriority priority,
                     const std::function<void(const std::string&)>& warn,
                     std::atomic<bool>* warned) {
  absl::Status status = LowerCurrentThreadPriority(priority);
  if (!status.ok() && warn && !warned->exchange(true)) {
    warn(absl::StrCat("dataset feed threads keep their priority (", ThreadPriorityName(priority),
                      " asked): ", status.message()));
  }
  // Named last: a thread that has its name already has its priority.
  pthread_setname_np(pthread_self(), name);  // at most 15 characters, or it is refused
}

void CheckFiles(const std::vector<std::string>& files) {
  FLEET_ENFORCE(!files.empty(), InvalidArgument,
                "the dataset's file list is empty (call set_filelist with at least one file)");
  std::vector<std::string> missing;
  for (const auto& file : files) {
    struct stat info;
    if (stat(file.c_str(), &info) != 0 || S_ISDIR(info.st_mode)) missing.push_back(file);
  }
  FLEET_ENFORCE(missing.empty(), NotFound, missing.size(), " of ", files.size(),
                " data files do not exist or are not files: '", absl::StrJoin(missing, "', '"),
                "'");
}

FileReaders::FileReaders(std::vector<std::string> files, const std::vector<SlotSpec>* slots,
                         ReaderOptions options, BlockSink sink, std::function<void()> on_finish)
    : files_(std::move(files)),
      slots_(slots),
      options_(std::move(options)),
      sink_(std::move(sink)),
      on_finish_(std::move(on_finish)) {
  FLEET_ENFORCE(options_.threads > 0, InvalidArgument, "reader thread count must be positive, got ",
                options_.threads);
  FLEET_ENFORCE(options_.block_samples > 0, InvalidArgument, "block size must be positive");
}

FileReaders::~FileReaders() {
  Cancel();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void FileReaders::Start() {
  int n = std::min<int>(options_.threads, static_cast<int>(files_.size()));
  n = std::max(n, 1);
  running_.store(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ReaderLoop(); });
}

bool FileReaders::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const size_t started = threads_.size();
  auto all_ended = [this, started]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return static_cast<size_t>(finished_) >= started;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&all_ended), timeout);
}

ReadStats FileReaders::Join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  absl::MutexLock lock(&mu_);
  if (error_) std::rethrow_exception(error_);
  return stats_;
}

void FileReaders::ReaderLoop() {
  EnterFeedThread("data_reader", options_.priority, options_.warn, &priority_warned_);
  ReadStats local;
  try {
    SampleBlock block(slots_);
    block.Reserve(options_.block_samples);
    size_t sequence = 0;
    size_t file = 0;
    while (!cancel_.load()) {
      file = next_file_.fetch_add(1);
      if (file >= files_.size()) break;
      ReadFile(file, &block, &sequence, &local);
    }
    if (!cancel_.load() && !block.empty()) Emit(&block, file, &sequence);
  } catch (...) {
    absl::MutexLock lock(&mu_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true);
    cancel_.store(true);
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.files += local.files;
    stats_.lines += local.lines;
    stats_.samples += local.samples;
    stats_.bad_lines += local.bad_lines;
    stats_.bytes += local.bytes;
    for (auto& e : local.bad_line_examples) {
      if (stats_.bad_line_examples.size() < kMaxBadLineExamples) {
        stats_.bad_line_examples.push_back(std::move(e));
      }
    }
    ++finished_;
  }
  if (running_.fetch_sub(1) == 1 && on_finish_) on_finish_();
}

void FileReaders::ReadFile(size_t index, SampleBlock* block, size_t* sequence, ReadStats* stats) {
  const std::string& path = files_[index];
  MultiSlotParser parser(slots_);
  LineStreamOptions stream_options;
  stream_options.idle_timeout = options_.pipe_idle_timeout;
  stream_options.warn = options_.warn;
  LineStream stream(path, options_.pipe_command, &cancel_, std::move(stream_options));
  if (options_.block_per_file) *sequence = 0;
  std::string_view line;
  while (stream.Next(&line)) {
    ++stats->lines;
    try {
      if (parser.Parse(line, path, stream.line_number(), block)) ++stats->samples;
    } catch (const InvalidArgument& e) {
      if (!options_.skip_bad_lines) throw;
      RecordBadLine(e.what(), stats);
    }
    if (block->size() >= options_.block_samples && !Emit(block, index, sequence)) return;
  }
  stats->bytes += stream.bytes_read();
  ++stats->files;
  if (options_.block_per_file && !block->empty() && !cancel_.load()) {
    Emit(block, index, sequence);
  }
}

bool FileReaders::Emit(SampleBlock* block, size_t file_index, size_t* sequence) {
  SampleBlock next(slots_);
  next.Reserve(options_.block_samples, block);
  bool more = sink_(std::move(*block), file_index, (*sequence)++);
  *block = std::move(next);
  if (!more) cancel_.store(true);
  return more;
}

void FileReaders::RecordBadLine(const std::string& message, ReadStats* stats) {
  ++stats->bad_lines;
  if (stats->bad_line_examples.size() < kMaxBadLineExamples) {
    stats->bad_line_examples.push_back(message);
  }
}

}  // namespace fleet::data

#include "data/line_stream.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/errors.h"

namespace fleet::data {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class LineStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_line_stream_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  static std::vector<std::string> ReadAll(LineStream* stream) {
    std::vector<std::string> lines;
    std::string_view line;
    while (stream->Next(&line)) lines.emplace_back(line);
    return lines;
  }

  std::string dir_;
};

TEST_F(LineStreamTest, ReadsFileWithAndWithoutFinalNewline) {
  LineStream a(Write("a", "x 1\ny 2\n"), "", nullptr);
  EXPECT_EQ(ReadAll(&a), (std::vector<std::string>{"x 1", "y 2"}));
  EXPECT_EQ(a.line_number(), 2);
  LineStream b(Write("b", "x 1\n\ny 2"), "", nullptr);
  EXPECT_EQ(ReadAll(&b), (std::vector<std::string>{"x 1", "", "y 2"}));
}

TEST_F(LineStreamTest, LinesLongerThanTheBuffer) {
  std::string long_line(3 << 20, 'z');
  LineStream s(Write("long", "a\n" + long_line + "\nb\n"), "", nullptr);
  auto lines = ReadAll(&s);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].size(), long_line.size());
  EXPECT_EQ(lines[2], "b");
}

TEST_F(LineStreamTest, MissingFileIsNotFound) {
  try {
    LineStream s(dir_ + "/nope", "", nullptr);
    FAIL();
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
}

TEST_F(LineStreamTest, PipeCommandTransformsTheFile) {
  LineStream s(Write("p", "1\n2\n3\n"), "awk '{print $1 * 10}'", nullptr);
  EXPECT_EQ(ReadAll(&s), (std::vector<std::string>{"10", "20", "30"}));
}

TEST_F(LineStreamTest, FailingCommandNamesFileAndStderrTail) {
  std::string path = Write("f", "1\n");
  LineStream s(path, "cat; echo 'reader blew up' >&2; exit 3", nullptr);
  std::string_view line;
  ASSERT_TRUE(s.Next(&line));
  try {
    s.Next(&line);
    FAIL() << "no error for exit 3";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("exited with code 3"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("reader blew up"), std::string::npos) << what;
  }
}

TEST_F(LineStreamTest, ChattyStderrDoesNotDeadlock) {
  // 1 MiB on stderr (more than a pipe buffer) before any stdout.
  LineStream s(Write("c", "1\n"), "head -c 1048576 /dev/zero | tr '\\0' x >&2; cat", nullptr);
  EXPECT_EQ(ReadAll(&s), (std::vector<std::string>{"1"}));
}

TEST_F(LineStreamTest, DestructorKillsAndReapsTheWholePipeline) {
  std::string pid_file = dir_ + "/pid";
  {
    // The shell records its pid and its process group (field 5 of /proc/self/stat).
    LineStream s(
        Write("k", "1\n"),
        "echo $$ $(cut -d' ' -f5 /proc/$$/stat) > " + pid_file + "; cat; sleep 1000 | sleep 1000",
        nullptr);
    std::string_view line;
    ASSERT_TRUE(s.Next(&line));
  }
  std::ifstream in(pid_file);
  pid_t pid = 0, group = 0;
  in >> pid >> group;
  ASSERT_GT(pid, 0);
  ASSERT_GT(group, 0);
  EXPECT_NE(group, getpgrp());  // the command ran in a group of its own
  // The whole group (guard, shell, sleeps) is killed; orphaned members are reaped by init,
  // which can take a moment.
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (kill(-group, 0) == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(kill(-group, 0), -1);
}

TEST_F(LineStreamTest, IdleCommandTimesOutNamingFileAndCommand) {
  LineStreamOptions options;
  options.idle_timeout = absl::Milliseconds(300);
  const std::string path = Write("idle", "1\n");
  LineStream s(path, "cat; sleep 1000", nullptr, options);
  std::string_view line;
  ASSERT_TRUE(s.Next(&line));
  absl::Time start = absl::Now();
  try {
    s.Next(&line);
    FAIL() << "no timeout";
  } catch (const Timeout& e) {
    EXPECT_PRED2(Contains, e.what(),
                 ("pipe_command 'cat; sleep 1000' on file '" + path + "' wrote nothing for 0.3 s"));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(LineStreamTest, CommandThatWritesNothingForANonEmptyFileIsWarnedAbout) {
  std::vector<std::string> warnings;
  LineStreamOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  const std::string path = Write("silent", "1 2 3\n");
  LineStream s(path, "cat > /dev/null", nullptr, options);
  std::string_view line;
  EXPECT_FALSE(s.Next(&line));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_PRED2(Contains, warnings[0],
               ("on file '" + path + "' wrote nothing for a file of 6 bytes"));
  LineStream empty(Write("empty", ""), "cat > /dev/null", nullptr, options);
  EXPECT_FALSE(empty.Next(&line));
  EXPECT_EQ(warnings.size(), 1u);  // an empty file is no surprise
}

TEST_F(LineStreamTest, StderrWithNulAndBinaryBytesIsEscaped) {
  const std::string path = Write("bin", "1\n");
  LineStream s(path, "printf 'bad\\000byte\\377\\n' >&2; exit 2", nullptr);
  std::string_view line;
  try {
    while (s.Next(&line)) {
    }
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_PRED2(Contains, e.what(), ("its stderr ends with:\nbad\\x00byte\\xff"));
  }
}

TEST_F(LineStreamTest, CancelStopsAWaitingRead) {
  std::atomic<bool> cancel{false};
  LineStream s(Write("w", "1\n"), "cat; sleep 1000", &cancel);
  std::string_view line;
  ASSERT_TRUE(s.Next(&line));
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(50));
    cancel.store(true);
  });
  absl::Time start = absl::Now();
  EXPECT_FALSE(s.Next(&line));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  canceller.join();
}

TEST(IdentityCommandTest, CatIsSkipped) {
  EXPECT_TRUE(IsIdentityCommand("cat"));
  EXPECT_TRUE(IsIdentityCommand("  cat "));
  EXPECT_FALSE(IsIdentityCommand("cat -n"));
  EXPECT_FALSE(IsIdentityCommand(""));
}

}  // namespace
}  // namespace fleet::data

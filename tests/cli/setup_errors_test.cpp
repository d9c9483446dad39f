// Setup failures seen from the command line: no OpenCL platform at all, and a kernel
// that does not build (its device build log must reach the user). Exit status 2 each,
// unless the host engine can do the work without OpenCL.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

// True when OCL_ICD_VENDORS=`dir` hides every platform from gpufilter: it does with the
// ICD loaders (ocl-icd, Khronos), not with a vendor's own libOpenCL found first on
// LD_LIBRARY_PATH, as on the GPU machine.
bool vendors_dir_hides_platforms(const std::string& dir) {
  const ProcessResult r = run_process({gpufilter_binary(), "--list-devices"}, {}, {"OCL_ICD_VENDORS=" + dir});
  return r.out.empty();
}

TEST(SetupErrors, NoOpenClPlatformSaysHowToInstallPocl) {
  TempDir empty;  // an ICD vendor directory with no driver in it
  if (!vendors_dir_hides_platforms(empty.path()))
    GTEST_SKIP() << "this machine's OpenCL library ignores OCL_ICD_VENDORS; no platform can be hidden";
  const std::string input = corpus_path("loghub/OpenSSH_2k.log");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--engine=gpu", "Failed", input},
                                             {"--list-devices"},
                                             {"-c", "-e", "x", "--engine=gpu", input},
                                             {"--device=gpu", "-c", "x", input}}) {
    std::vector<std::string> argv{gpufilter_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv, {}, {"OCL_ICD_VENDORS=" + empty.path()});
    EXPECT_EQ(r.status, 2) << describe_args(args);
    EXPECT_EQ(r.out, "") << describe_args(args);
    EXPECT_NE(r.err.find("no OpenCL platform"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pocl-opencl-icd"), std::string::npos) << r.err;
  }
}

TEST(SetupErrors, WithoutOpenClTheDefaultEngineStillSearches) {
  TempDir empty;
  if (!vendors_dir_hides_platforms(empty.path()))
    GTEST_SKIP() << "this machine's OpenCL library ignores OCL_ICD_VENDORS; no platform can be hidden";
  const std::string input = corpus_path("loghub/OpenSSH_2k.log");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-c", "Failed", input}, {"-n", "-i", "-e", "root", "-e", "INVALID", input}}) {
    std::vector<std::string> argv{gpufilter_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv, {}, {"OCL_ICD_VENDORS=" + empty.path()});
    const GrepRun grep = run_grep(args, {});
    EXPECT_EQ(r.status, 0) << describe_args(args) << r.err;
    EXPECT_EQ(r.err, "") << describe_args(args);
    EXPECT_TRUE(r.out == grep.out) << describe_args(args) << first_difference(grep.out, r.out);
    EXPECT_GE(grep.out.size(), 4u);  // "364\n" for -c; lines for -n
  }
}

TEST(SetupErrors, KernelBuildFailureShowsTheBuildLog) {
  TempDir kernels;
  std::ofstream(kernels.path() + "/scan.cl") << "__kernel void scan(__global int* x) { x[0] = not_declared_here; }\n";
  const ProcessResult r = run_process({gpufilter_binary(), "--engine=gpu", "Failed", corpus_path("loghub/OpenSSH_2k.log")}, {},
                                      {"GPUFILTER_KERNEL_DIR=" + kernels.path()});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("building OpenCL program scan.cl failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--- build log for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not_declared_here"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpufilter::test

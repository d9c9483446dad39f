# Sanitizer and fuzzing instrumentation, set once for every target of the build.
#   -DGPUFILTER_SANITIZE=address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer
#   -DGPUFILTER_SANITIZE=thread              ThreadSanitizer
#   -DGPUFILTER_FUZZ=ON                      libFuzzer coverage on every target (clang), and
#                                            the fuzz targets of tests/fuzz/
# scripts/sanitize.sh builds and runs these jobs; docs/RELIABILITY.md says what each covers.
if(GPUFILTER_SANITIZE)
  if(NOT GPUFILTER_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "GPUFILTER_SANITIZE: expected address,undefined or thread, got '${GPUFILTER_SANITIZE}'")
  endif()
  # No recovery: the first report fails the test that caused it. Frame pointers keep the
  # reports' stacks whole at -O1.
  add_compile_options(-fsanitize=${GPUFILTER_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${GPUFILTER_SANITIZE})
  # UBSan's vptr check is left out, for this reason: before it reads a vtable it probes the
  # memory through a pipe(), so in a process out of file descriptors it reports every
  # virtual call as one on an object of the wrong type, and ends it. gpufilter's listener
  # must survive running out of descriptors, and HostileInput.DescriptorExhaustion* makes
  # it do so: with the check, that test failed one run in three (moodycamel's queue).
  if(GPUFILTER_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=vptr)
  endif()
  # A macro the code can test where a sanitizer changes what is measurable (RSS bounds).
  add_compile_definitions(GPUFILTER_SANITIZED=1)
endif()

if(GPUFILTER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GPUFILTER_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage feedback for every library the fuzz targets reach; only the targets link the
  # fuzzer's main (tests/fuzz/CMakeLists.txt).
  # The ignore list keeps coverage callbacks out of spin loops (moodycamel's queue), which
  # otherwise take most of a pipeline target's time and none of its findings.
  # Ninja compiles in the build tree's top folder: there the list is a copy named by its
  # contents, so that the flag reads the same in every checkout (ccache reuses the objects)
  # and changes when the list does.
  set(ignorelist ${PROJECT_SOURCE_DIR}/tests/fuzz/coverage_ignorelist.txt)
  if(CMAKE_GENERATOR MATCHES "Ninja")
    file(MD5 ${ignorelist} ignorelist_md5)
    configure_file(${ignorelist} ${CMAKE_BINARY_DIR}/coverage-ignorelist-${ignorelist_md5}.txt COPYONLY)
    set(ignorelist coverage-ignorelist-${ignorelist_md5}.txt)
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=${ignorelist})
endif()

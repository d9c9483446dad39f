# gpufilter_library(NAME SOURCES...): one library per folder, aliased gpufilter::NAME,
# with its public headers under <folder>/include and warnings set per target.
function(gpufilter_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion)
  if(GPUFILTER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(gpufilter_library name)
  add_library(gpufilter_${name} STATIC ${ARGN})
  add_library(gpufilter::${name} ALIAS gpufilter_${name})
  target_include_directories(gpufilter_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_compile_features(gpufilter_${name} PUBLIC cxx_std_20)
  set_target_properties(gpufilter_${name} PROPERTIES OUTPUT_NAME gpufilter_${name})
  gpufilter_warnings(gpufilter_${name})
endfunction()

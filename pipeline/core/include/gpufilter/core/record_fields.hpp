// RecordFields: what a source knows about a record beside its bytes (a Kafka record's
// topic, partition, offset, key and headers), carried with its lines through the
// RecordChannel to the sinks (LineMatch::fields). gpufilterd's rules read them as they
// read a regex's named groups: in label templates ("{{kafka.key}}") and group_by.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpufilter {

struct RecordFields {
  std::vector<std::pair<std::string, std::string>> values;  // (name, value), names unique
};

}  // namespace gpufilter

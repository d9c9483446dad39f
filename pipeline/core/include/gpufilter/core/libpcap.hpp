// libpcap, loaded (dlopen) the first time a capture (read or written) needs it, not linked: through its
// D-Bus support it brings libdbus, libsystemd, libgcrypt and libcap, whose loading cost
// every start of gpufilter about 1 ms (of 3; grep starts in 1), and most runs read no
// capture. libpcap().NAME is the library's NAME, with its own signature.
#pragma once

#include <pcap/pcap.h>

#define GPUFILTER_LIBPCAP_FUNCTIONS(X)                                                                    \
  X(pcap_activate) X(pcap_breakloop) X(pcap_close) X(pcap_compile) X(pcap_create) X(pcap_datalink)        \
  X(pcap_datalink_val_to_name) X(pcap_file) X(pcap_fopen_offline_with_tstamp_precision) X(pcap_freecode) \
  X(pcap_get_tstamp_precision) X(pcap_geterr) X(pcap_is_swapped) X(pcap_next_ex) X(pcap_offline_filter)  \
  X(pcap_open_dead) X(pcap_set_immediate_mode) X(pcap_set_promisc) X(pcap_set_snaplen)                   \
  X(pcap_set_timeout) X(pcap_set_tstamp_precision) X(pcap_setfilter) X(pcap_snapshot) X(pcap_statustostr)   \
  X(pcap_dump) X(pcap_dump_close) X(pcap_dump_file) X(pcap_dump_flush) X(pcap_dump_fopen)                  \
  X(pcap_open_dead_with_tstamp_precision)

namespace gpufilter {

struct Libpcap {
#define GPUFILTER_LIBPCAP_MEMBER(name) decltype(&::name) name = nullptr;
  GPUFILTER_LIBPCAP_FUNCTIONS(GPUFILTER_LIBPCAP_MEMBER)
#undef GPUFILTER_LIBPCAP_MEMBER
};

// The library's functions; throws SourceError ("captures need libpcap ...") when it
// cannot be loaded (libpcap0.8 not installed).
const Libpcap& libpcap();
// The same, or null where it cannot be loaded.
const Libpcap* try_libpcap() noexcept;

}  // namespace gpufilter

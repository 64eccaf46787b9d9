// Counts what the kernel says this process's TCP connections sent (its own TU: <linux/tcp.h>,
// which has the data segment counter, clashes with the <netinet/tcp.h> that Asio includes).
#pragma once
#include <cstdint>

namespace zt {
/// Data segments sent so far on this process's TCP connections to `port` (tcp_info's
/// tcpi_data_segs_out, each socket counted once however many descriptors it has).
std::uint64_t data_segments_sent_to(unsigned short port);
} // namespace zt

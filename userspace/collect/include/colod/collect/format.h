// SPDX-License-Identifier: Apache-2.0
// Pure text formatting of log2 histograms in the runqlat style (style rule 39).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace colod::collect {

// Formats a log2 histogram like bcc's print_log2_hist: one line per slot from slot 0 to the
// last non-empty slot, "     lo -> hi         : count    |****    |", lines < 80 columns.
// `unit` is the column title ("usecs"). An all-zero histogram yields "" (nothing to show).
std::string formatLog2Hist(std::span<const uint32_t> slots, std::string_view unit);

}  // namespace colod::collect

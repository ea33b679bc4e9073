// SPDX-License-Identifier: Apache-2.0
#include "sched_sums.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bpf_util.h"
#include "cgsched.h"
#include "colod/base/unique_fd.h"
#include "sched_map_pool.h"
#include "schedsum.skel.h"

namespace colod::collect::detail {

static_assert(sizeof(colod_sched_sum) == 152);
static_assert(std::is_trivially_copyable_v<colod_sched_sum>);

struct KernelSums::Owned {
  bpf::Skeleton<schedsum, &schedsum__destroy> skel;
  std::unique_ptr<bpf_link, int (*)(bpf_link*)> link{nullptr, &bpf_link__destroy};
};

KernelSums::KernelSums(std::unique_ptr<Owned> owned) : owned_(std::move(owned)) {}
KernelSums::KernelSums(KernelSums&&) noexcept = default;
KernelSums& KernelSums::operator=(KernelSums&&) noexcept = default;
KernelSums::~KernelSums() = default;

Result<KernelSums> KernelSums::open(const Maps& maps,
                                    uint32_t sched_cpus,
                                    uint32_t max_slots,
                                    bool cpu_marks) {
  // Some kernels refuse BPF iterators (seen: EPERM on a 6.18 host for any iter program); the
  // caller says so once, in plain words, and libbpf's warnings are kept to the debug log.
  const bpf::OptionalLoad quiet;
  auto s = bpf::openSkeleton<schedsum, &schedsum__destroy>(&schedsum__open, "schedsum");
  if (!s) {
    return std::move(s).error();
  }
  (*s)->rodata->sched_cpus = sched_cpus;
  (*s)->rodata->max_slots = max_slots;
  (*s)->rodata->use_cpu_marks = cpu_marks ? 1 : 0;
  const std::pair<bpf_map*, int> reuse[] = {{(*s)->maps.cg_slots, maps.cg_slots},
                                            {(*s)->maps.cg_sched, maps.cg_sched},
                                            {(*s)->maps.cg_dirty, maps.cg_dirty},
                                            {(*s)->maps.cg_cpus, maps.cg_cpus}};
  for (const auto& [map, fd] : reuse) {
    if (const int rc = bpf_map__reuse_fd(map, fd); rc < 0) {
      return COLOD_ERR(-rc, "schedsum: reusing ", bpf_map__name(map));
    }
  }
  COLOD_TRY_VOID(bpf::check(schedsum__load(s->get()), "loading the summing iterator"), "schedsum");
  auto owned = std::make_unique<Owned>();
  owned->skel = std::move(*s);
  union bpf_iter_link_info info {};
  info.map.map_fd = static_cast<uint32_t>(maps.cg_slots);
  DECLARE_LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info,
                      .link_info_len = sizeof(info));
  errno = 0;
  bpf_link* link = bpf_program__attach_iter(owned->skel->progs.sum_slots, &opts);
  if (link == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    return COLOD_ERR(err, "attaching the summing iterator to cg_slots");
  }
  owned->link.reset(link);
  return KernelSums(std::move(owned));
}

Result<std::size_t> KernelSums::read(SchedMap& out, SchedMapPool& pool, bool all) {
  // Read by the iterator's program when the walk starts; one reader, so no race on it.
  owned_->skel->bss->changed_only = all ? 0 : 1;
  UniqueFd fd(bpf_iter_create(bpf_link__fd(owned_->link.get())));
  if (!fd) {
    return COLOD_ERR(errno, "starting a walk of cg_slots");
  }
  if (buf_.size() < 64 * sizeof(colod_sched_sum)) {
    buf_.resize(64 * sizeof(colod_sched_sum));
  }
  std::size_t len = 0;
  for (;;) {
    if (len == buf_.size()) {
      buf_.resize(buf_.size() * 2);
    }
    const ssize_t n = ::read(fd.get(), buf_.data() + len, buf_.size() - len);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return COLOD_ERR(errno, "reading the walk of cg_slots");
    }
    if (n == 0) {
      break;
    }
    len += static_cast<std::size_t>(n);
  }
  last_bytes_ = len;
  return parseSchedSums(buf_.data(), len, out, pool, &last_copies_);
}

Result<std::size_t> parseSchedSums(
    const uint8_t* data, std::size_t len, SchedMap& out, SchedMapPool& pool, uint64_t* cpu_copies) {
  pool.recycle(out);
  if (cpu_copies != nullptr) {
    *cpu_copies = 0;
  }
  if (len % sizeof(colod_sched_sum) != 0) {
    return COLOD_ERR(EPROTO, "the summing iterator wrote ", len, " bytes, not a whole number of ",
                     sizeof(colod_sched_sum), "-byte records");
  }
  const std::size_t n = len / sizeof(colod_sched_sum);
  SchedMapPool::reserve(out, n);  // never shrinks: the map comes back from the pool each tick
  for (std::size_t i = 0; i < n; ++i) {
    colod_sched_sum r{};
    std::memcpy(&r, data + i * sizeof(r), sizeof(r));
    pool.put(out, r.id, SchedEntry{r.slot, r.sum});
    if (cpu_copies != nullptr) {
      *cpu_copies += r.cpus;
    }
  }
  return n;
}

}  // namespace colod::collect::detail

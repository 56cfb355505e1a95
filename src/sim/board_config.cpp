#include "sim/board_config.h"

#include <filesystem>

#include <fmt/format.h>

namespace bitsim::sim {

namespace {
ParamSpec real(std::string key, double v, double lo, double hi, std::string unit, std::string ev, std::string doc) {
  return {std::move(key), ParamType::Real, v, lo, hi, {}, std::move(unit), std::move(ev), std::move(doc)};
}
ParamSpec integer(std::string key, int64_t v, double lo, double hi, std::string unit, std::string ev, std::string doc) {
  return {std::move(key), ParamType::Integer, v, lo, hi, {}, std::move(unit), std::move(ev), std::move(doc)};
}
ParamSpec boolean(std::string key, bool v, std::string ev, std::string doc) {
  return {std::move(key), ParamType::Boolean, v, 0, -1, {}, "", std::move(ev), std::move(doc)};
}
ParamSpec text(std::string key, std::string v, std::vector<std::string> choices, std::string ev, std::string doc) {
  return {std::move(key), ParamType::Text, std::move(v), 0, -1, std::move(choices), "", std::move(ev), std::move(doc)};
}

void driver_keys(std::vector<ParamSpec>& s, const std::string& p, const host::DriverConfig& d, const std::string& ev,
                 const std::string& src) {
  s.push_back(real("driver." + p + ".reg_access_ns", d.reg_access_ns, 0, 1e6, "ns", ev,
                   "CPU time of one AXI-Lite register access (read or write); " + src));
  s.push_back(real("driver." + p + ".call_overhead_ns", d.call_overhead_ns, 0, 1e7, "ns", ev,
                   "fixed CPU time per driver call (both lanes of one matmul or attention call)"));
  s.push_back(real("driver." + p + ".flush_fixed_ns", d.flush_fixed_ns, 0, 1e7, "ns", ev,
                   "cache clean of one CPU-written buffer before a DMA reads it: fixed part"));
  s.push_back(real("driver." + p + ".flush_ns_per_byte", d.flush_ns_per_byte, 0, 1e3, "ns/B", ev,
                   "cache clean: per byte"));
  s.push_back(real("driver." + p + ".invalidate_fixed_ns", d.invalidate_fixed_ns, 0, 1e7, "ns", ev,
                   "cache invalidate of one buffer the CPU will read after a DMA wrote it: fixed part"));
  s.push_back(real("driver." + p + ".invalidate_ns_per_byte", d.invalidate_ns_per_byte, 0, 1e3, "ns/B", ev,
                   "cache invalidate: per byte"));
  s.push_back(real("driver." + p + ".poll_gap_ns", d.poll_gap_ns, 0, 1e7, "ns", ev,
                   "CPU time between two DMASR polls besides the register access itself"));
}
}  // namespace

ParamSet board_params() {
  std::vector<ParamSpec> s;
  const hw::BoardConfig b;
  s.push_back(real("clock.mhz", b.clock.mhz, 1, 1000, "MHz", "board",
                   "PL clock of the DMAs, HP ports and engines (BOARD.md: 125 MHz = IO PLL 1000/8)"));
  s.push_back(real("ddr.wall_gb_s", b.ddr.wall_bytes_per_s / 1e9, 0.01, 100, "GB/s", "board",
                   "DDR read wall seen from the PL, shared by both HP ports (BOARD.md: 2.009 GB/s measured)"));
  s.push_back(real("ddr.read_latency_ns", b.ddr.read_latency_ns, 0, 10000, "ns", "calibrated",
                   "read burst accepted -> first data beat (no board figure; fitted, CIRCUITS.md 6)"));
  s.push_back(real("ddr.write_latency_ns", b.ddr.write_latency_ns, 0, 10000, "ns", "simulated",
                   "write burst's last beat -> write response"));
  s.push_back(integer("ddr.max_pending_bursts", b.ddr.max_pending_bursts, 1, 256, "bursts", "simulated",
                      "bursts the DDR controller queues per port and direction"));
  s.push_back(integer("hp.max_burst_beats", b.hp.max_burst_beats, 1, 16, "beats", "board",
                      "longest AXI3 burst on an HP port (UG585: 16 beats of 8 bytes)"));
  s.push_back(integer("hp.max_outstanding_reads", b.hp.max_outstanding_reads, 1, 64, "bursts", "simulated",
                      "read bursts in flight per HP port"));
  s.push_back(integer("hp.max_outstanding_writes", b.hp.max_outstanding_writes, 1, 64, "bursts", "simulated",
                      "write bursts in flight per HP port"));
  s.push_back(integer("dma.length_bits", b.dma.length_bits, 8, 26, "bits", "board",
                      "AXI DMA length register width: transfers up to 2^bits - 1 bytes (BOARD.md: 23)"));
  s.push_back(integer("dma.sg_tail_to_fetch", b.dma.sg_tail_to_fetch, 0, 1000, "cycles", "board",
                      "SG: TAILDESC write -> descriptor read request (PG021)"));
  s.push_back(integer("dma.desc_to_data", b.dma.desc_to_data, 0, 1000, "cycles", "board",
                      "SG: descriptor arrived -> data request (PG021)"));
  s.push_back(integer("dma.read_to_stream", b.dma.read_to_stream, 0, 1000, "cycles", "board",
                      "MM2S: first read data -> first stream beat (PG021)"));
  s.push_back(integer("dma.s2mm_beat_to_write", b.dma.s2mm_beat_to_write, 0, 1000, "cycles", "board",
                      "S2MM: first stream beat -> write request (PG021)"));
  s.push_back(integer("dma.datamover_cmd_to_read", b.dma.datamover_cmd_to_read, 0, 1000, "cycles", "board",
                      "DataMover command -> read request (PG021)"));
  s.push_back(integer("dma.max_burst_beats", b.dma.max_burst_beats, 1, 256, "beats", "board",
                      "DataMover burst size (PG021: 16)"));
  s.push_back(integer("dma.mm2s_fifo_beats", b.dma.mm2s_fifo_beats, 1, 4096, "beats", "simulated",
                      "MM2S data FIFO: reads are requested only when their beats fit"));
  s.push_back(integer("dma.s2mm_fifo_beats", b.dma.s2mm_fifo_beats, 1, 4096, "beats", "simulated",
                      "S2MM data FIFO"));
  s.push_back(integer("matmul.pipeline_depth", b.matmul.pipeline_depth, 0, 1000, "cycles", "calibrated",
                      "matmul engine: row's last beat -> its result (CIRCUITS.md 2)"));
  s.push_back(integer("matmul.output_fifo_beats", b.matmul.output_fifo_beats, 1, 4096, "beats", "simulated",
                      "matmul engine result FIFO per lane"));
  s.push_back(integer("attention.drain", b.attention.drain, 0, 10000, "cycles", "calibrated",
                      "attention unit: head's last V beat -> first result beat (CIRCUITS.md 3)"));
  s.push_back(integer("attention.output_fifo_beats", b.attention.output_fifo_beats, 1, 4096, "beats", "simulated",
                      "attention unit result FIFO per lane"));
  const host::MemoryMapConfig mm;
  s.push_back(integer("cma.base", int64_t(mm.cma_base), 0, double(512ull << 20), "bytes", "simulated",
                      "physical address of the contiguous-memory region"));
  s.push_back(integer("cma.mib", int64_t(mm.cma_bytes >> 20), 1, 512, "MiB", "simulated",
                      "contiguous memory for every DMA buffer; BOARD.md says 128 MiB, but its own "
                      "figures (141.3 MiB of weights + 36 MiB of KV cache) need more: 192 MiB fits "
                      "them and refuses an INT8 lm_head, as the board did (docs/memory.md)"));
  s.push_back(boolean("model.int8_lm_head", false, "simulated",
                      "lay out an INT8 lm_head (refused by the CMA budget, as on the board)"));
  s.push_back(real("timing.pass_mhz", 125.0, 1, 1000, "MHz", "board",
                   "highest PL clock known to close timing on the board (BOARD.md: 125 MHz passed)"));
  s.push_back(real("timing.fail_mhz", 142.86, 1, 1000, "MHz", "board",
                   "PL clock known to fail timing (BOARD.md: 142.86 MHz failed twice, in the AXI DMA's length counter)"));
  s.push_back(integer("timing.fail_length_bits", 23, 8, 26, "bits", "board",
                      "the DMA length-counter width of that failure (a wider counter is no easier to close)"));
  s.push_back(text("driver.profile", "c", {"c", "python"}, "board",
                   "DMA driver: c (the board's final state) or python (PYNQ's driver)"));
  host::DriverConfig c;  // C driver defaults
  driver_keys(s, "c", c, "calibrated", "C over /dev/mem mmap");
  host::DriverConfig py;
  py.reg_access_ns = 10000;     // BOARD.md: 6-14 us from Python
  py.call_overhead_ns = 50000;  // per transfer+wait from Python
  py.flush_fixed_ns = 30000;    // one cache-maintenance ioctl per buffer
  py.flush_ns_per_byte = 0.05;
  py.invalidate_fixed_ns = 30000;
  py.invalidate_ns_per_byte = 0.05;
  py.poll_gap_ns = 0;
  driver_keys(s, "python", py, "board", "BOARD.md: 6-14 us per access from Python, 27-36 us public figure");
  const host::CpuModelConfig cpu;
  s.push_back(real("cpu.step_overhead_ns", cpu.step_overhead_ns, 0, 1e7, "ns", "calibrated",
                   "fixed Cortex-A9 time of each CPU step of the token loop"));
  for (int i = 0; i < host::kCpuSteps; ++i)
    s.push_back(real(fmt::format("cpu.ns_per_element.{}", host::cpu_step_name(host::CpuStep(i))),
                     cpu.ns_per_element[size_t(i)], 0, 1e5, "ns", "calibrated",
                     fmt::format("Cortex-A9 (NEON C) time per element of the {} step",
                                 host::cpu_step_name(host::CpuStep(i)))));
  s.push_back(real("cpu.write_ns_per_byte", cpu.write_ns_per_byte, 0, 1e3, "ns/B", "calibrated",
                   "CPU stores into DMA buffers (headers, x, K/V rows, descriptors)"));
  // The calibrated values (`bitsim calibrate --write`, docs/calibration.md): the defaults
  // compiled in equal configs/pynq-z2.toml, and a test checks that they agree.
  const std::pair<const char*, double> calibrated[] = {
      {"ddr.read_latency_ns", 367.86},
      {"driver.c.call_overhead_ns", 64443.0},
      {"driver.c.flush_ns_per_byte", 1.7447},
      {"driver.c.invalidate_ns_per_byte", 1.7447},
      {"cpu.step_overhead_ns", 5457.6254},
      {"cpu.ns_per_element.embed", 2.7288},
      {"cpu.ns_per_element.rmsnorm", 16.3729},
      {"cpu.ns_per_element.quantize", 16.3729},
      {"cpu.ns_per_element.dequantize", 10.9152},
      {"cpu.ns_per_element.rope", 27.2881},
      {"cpu.ns_per_element.quantize_heads", 21.8305},
      {"cpu.ns_per_element.attn_finish", 10.9152},
      {"cpu.ns_per_element.silu_gate", 54.5762},
      {"cpu.ns_per_element.residual", 5.4576},
      {"cpu.ns_per_element.argmax", 8.1864},
      {"cpu.write_ns_per_byte", 2.7288},
  };
  for (auto& spec : s)
    for (const auto& [key, value] : calibrated)
      if (spec.key == key) spec.value = value;
  return ParamSet(std::move(s));
}

std::string default_config_path() {
  const std::filesystem::path p = std::filesystem::path(BITSIM_SOURCE_DIR) / "configs" / "pynq-z2.toml";
  return std::filesystem::exists(p) ? p.string() : std::string();
}

SimConfig make_sim_config(const ParamSet& p) {
  SimConfig c;
  auto& b = c.board;
  b.clock.mhz = p.real("clock.mhz");
  b.ddr.wall_bytes_per_s = p.real("ddr.wall_gb_s") * 1e9;
  b.ddr.read_latency_ns = p.real("ddr.read_latency_ns");
  b.ddr.write_latency_ns = p.real("ddr.write_latency_ns");
  b.ddr.max_pending_bursts = int(p.integer("ddr.max_pending_bursts"));
  b.hp.max_burst_beats = int(p.integer("hp.max_burst_beats"));
  b.hp.max_outstanding_reads = int(p.integer("hp.max_outstanding_reads"));
  b.hp.max_outstanding_writes = int(p.integer("hp.max_outstanding_writes"));
  b.dma.length_bits = int(p.integer("dma.length_bits"));
  b.dma.sg_tail_to_fetch = int(p.integer("dma.sg_tail_to_fetch"));
  b.dma.desc_to_data = int(p.integer("dma.desc_to_data"));
  b.dma.read_to_stream = int(p.integer("dma.read_to_stream"));
  b.dma.s2mm_beat_to_write = int(p.integer("dma.s2mm_beat_to_write"));
  b.dma.datamover_cmd_to_read = int(p.integer("dma.datamover_cmd_to_read"));
  b.dma.max_burst_beats = int(p.integer("dma.max_burst_beats"));
  b.dma.mm2s_fifo_beats = int(p.integer("dma.mm2s_fifo_beats"));
  b.dma.s2mm_fifo_beats = int(p.integer("dma.s2mm_fifo_beats"));
  b.matmul.pipeline_depth = int(p.integer("matmul.pipeline_depth"));
  b.matmul.output_fifo_beats = int(p.integer("matmul.output_fifo_beats"));
  b.attention.drain = int(p.integer("attention.drain"));
  b.attention.output_fifo_beats = int(p.integer("attention.output_fifo_beats"));
  c.memory.cma_base = uint64_t(p.integer("cma.base"));
  c.memory.cma_bytes = uint64_t(p.integer("cma.mib")) << 20;
  c.memory.max_transfer_bytes = (uint64_t(1) << b.dma.length_bits) - 1;
  c.memory.int8_lm_head = p.boolean("model.int8_lm_head");
  const std::string prof = p.text("driver.profile");
  c.driver.profile = prof;
  const std::string d = "driver." + prof + ".";
  c.driver.reg_access_ns = p.real(d + "reg_access_ns");
  c.driver.call_overhead_ns = p.real(d + "call_overhead_ns");
  c.driver.flush_fixed_ns = p.real(d + "flush_fixed_ns");
  c.driver.flush_ns_per_byte = p.real(d + "flush_ns_per_byte");
  c.driver.invalidate_fixed_ns = p.real(d + "invalidate_fixed_ns");
  c.driver.invalidate_ns_per_byte = p.real(d + "invalidate_ns_per_byte");
  c.driver.poll_gap_ns = p.real(d + "poll_gap_ns");
  c.cpu.step_overhead_ns = p.real("cpu.step_overhead_ns");
  for (int i = 0; i < host::kCpuSteps; ++i)
    c.cpu.ns_per_element[size_t(i)] =
        p.real(fmt::format("cpu.ns_per_element.{}", host::cpu_step_name(host::CpuStep(i))));
  c.cpu.write_ns_per_byte = p.real("cpu.write_ns_per_byte");
  return c;
}

}  // namespace bitsim::sim

// Timeline colours and labels, shared by the timeline and its extensions.
export const TL_COLORS = {
  kernel: "#4c78a8", memcpy_h2d: "#f58518", memcpy_d2h: "#b279a2", memcpy_d2d: "#9d755d",
  memset: "#72b7b2", cpu_op: "#bab0ac", launch: "#54a24b", sync_wait: "#e45756",
  collective: "#eeca3b", annotation: "#d4d4d4", sample: "#d6c9e8",
};
export const TL_LABELS = {
  kernel: "kernel", memcpy_h2d: "copy H2D", memcpy_d2h: "copy D2H", memcpy_d2d: "copy D2D", memset: "memset",
  cpu_op: "CPU op", launch: "launch", sync_wait: "sync wait", collective: "collective", annotation: "annotation",
  sample: "Python stack",
};
// A collapsed rank's summary lane: busy outside collectives, in collectives (as the collective boxes), idle.
export const RANK_COLORS = { comm: TL_COLORS.collective, busy: "#4c78a8", idle: "#eef0f4" };
export const RANK_LABELS = { busy: "busy", comm: "in collectives" };
export const TL_ROLE = {
  cpu_thread: "CPU thread", transfer_stream: "transfer stream", compute_stream: "compute stream",
  comm_stream: "comm stream", other_stream: "other stream",
};

/*
 * Per-op time profile of graph work (internal side; the public switch and
 * report are tfc_profile_* in tfcore/graph.h). On when the environment
 * variable TFC_PROFILE is set (to anything but "0") when the process first
 * records a node, or after tfc_profile_enable(1). Forward time of an op is
 * the time since the previous node was recorded (an op computes, then
 * records), so forward calls made without a graph are not seen; backward
 * time is each node's turn in the engine, gradient accumulation included.
 * The gap between a backward and the next recorded node (clipping, the
 * optimizer step, the next batch) is its own row. With TFC_PROFILE the
 * table goes to stderr at exit, per backward pass (per training step).
 * Meant for one thread driving the graphs; the numbers are approximate
 * when several do.
 */
#ifndef TFC_AUTOGRAD_PROFILE_H
#define TFC_AUTOGRAD_PROFILE_H

int tfc_profile_enabled(void);
double tfc_profile_now(void);
/* An op named `name` was just recorded: its forward ran since the last mark. */
void tfc_profile_forward(const char *name);
/* A backward pass starts (begin = 1) or ends (begin = 0). */
void tfc_profile_backward_pass(int begin);
/* Node `name` took `secs` in the backward engine. */
void tfc_profile_backward(const char *name, double secs);

#endif

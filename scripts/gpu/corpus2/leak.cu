// A native CUDA program for the second alert corpus, run through `gpumon run`
// so the interposer is its only reporter (no Python, no companion).
//
//   nvcc -O2 -o leak leak.cu -ldl
//   ./leak --name native_leak --seconds 220 --step-ms 500 --leak-mib 8 --onset-s 20
//   ./leak --name native_leak_epochs --seconds 220 --leak-mib 6 --onset-epoch 10 --epoch-steps 4
//
// Each step: a churn buffer of 64-96 MiB is allocated, used by a kernel and freed (so live
// bytes rise and fall within a step), and once the leak has begun `--leak-mib` more is
// allocated and kept. With --epoch-steps N the program marks an epoch every N steps by
// calling the interposer's `gpumon_epoch()` through dlsym (it runs unchanged without it).
// Ground truth goes to stdout as JSON lines, like scenario2.py's.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

__global__ void touch(float* a, size_t n, float v) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) a[i] = a[i] * 0.5f + v;
}

int main(int argc, char** argv) {
  std::string name = "native";
  double seconds = 60, onset_s = -1;
  int step_ms = 500, onset_epoch = -1, epoch_steps = 0;
  double leak_mib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--name") name = v;
    else if (k == "--seconds") seconds = atof(v);
    else if (k == "--step-ms") step_ms = atoi(v);
    else if (k == "--leak-mib") leak_mib = atof(v);
    else if (k == "--onset-s") onset_s = atof(v);
    else if (k == "--onset-epoch") onset_epoch = atoi(v);
    else if (k == "--epoch-steps") epoch_steps = atoi(v);
  }
  typedef void (*mark_fn)();
  mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gpumon_epoch");
  long long t0 = now_ms();
  printf("{\"type\":\"start\",\"scenario\":\"%s\",\"pid\":%d,\"t_ms\":%lld,\"marker_fn\":%s,"
         "\"leak_bytes_per_step\":%.0f,\"onset_s\":%.1f,\"onset_epoch\":%d,\"epoch_steps\":%d,"
         "\"step_ms\":%d}\n",
         name.c_str(), (int)getpid(), t0, mark ? "true" : "false", leak_mib * (1 << 20), onset_s,
         onset_epoch, epoch_steps, step_ms);
  fflush(stdout);
  size_t work_n = (256u << 20) / sizeof(float);
  float* work = nullptr;
  if (cudaMalloc(&work, work_n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(work, 0, work_n * sizeof(float));
  std::vector<void*> kept;
  std::vector<long long> epoch_t;
  size_t leaked = 0;
  long long onset_t = -1, oom_t = -1;
  int step = 0, epoch = 0;
  unsigned rng = 12345;
  while (now_ms() - t0 < seconds * 1000) {
    long long s0 = now_ms();
    rng = rng * 1103515245u + 12345u;
    size_t churn = ((64u + (rng >> 16) % 33u) << 20);
    float* c = nullptr;
    if (cudaMalloc(&c, churn) != cudaSuccess) { oom_t = now_ms(); break; }
    touch<<<264, 256>>>(c, churn / sizeof(float), 1.0f);
    touch<<<264, 256>>>(work, work_n, 2.0f);
    cudaDeviceSynchronize();
    cudaFree(c);
    bool leaking = (onset_s >= 0 && (s0 - t0) >= onset_s * 1000) ||
                   (onset_epoch >= 0 && epoch >= onset_epoch);
    if (leaking && leak_mib > 0) {
      if (onset_t < 0) onset_t = s0;
      void* p = nullptr;
      size_t n = (size_t)(leak_mib * (1 << 20));
      if (cudaMalloc(&p, n) != cudaSuccess) { oom_t = now_ms(); break; }
      cudaMemset(p, 1, n);
      kept.push_back(p);
      leaked += n;
    }
    step++;
    if (epoch_steps > 0 && step % epoch_steps == 0) {
      cudaDeviceSynchronize();
      if (mark) mark();
      epoch_t.push_back(now_ms());
      epoch++;
    }
    long long spent = now_ms() - s0;
    if (spent < step_ms) usleep((step_ms - spent) * 1000);
  }
  printf("{\"type\":\"truth\",\"scenario\":\"%s\",\"pid\":%d,\"ok\":true,\"t_start_ms\":%lld,"
         "\"t_end_ms\":%lld,\"steps\":%d,\"epochs\":%d,\"leak_onset_t_ms\":%lld,\"leaked_total\":%zu,"
         "\"leak_bytes_per_s\":%.0f,\"oom_t_ms\":%lld,\"epoch_times\":[",
         name.c_str(), (int)getpid(), t0, now_ms(), step, epoch, onset_t, leaked,
         leak_mib * (1 << 20) * 1000.0 / step_ms, oom_t);
  for (size_t i = 0; i < epoch_t.size(); i++) printf("%s%lld", i ? "," : "", epoch_t[i]);
  printf("]}\n");
  fflush(stdout);
  for (void* p : kept) cudaFree(p);
  cudaFree(work);
  return 0;
}

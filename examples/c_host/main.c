/* A C program that runs an ortquant model through onnxruntime's C API (no Python).
 *
 * Build (from the repository root; ORT_DIR holds libonnxruntime.so of onnxruntime 1.19 or later, e.g. the lib/ of
 * an onnxruntime release archive; README.md next to this file shows how to use the onnxruntime Python package's):
 *
 *   cc -std=c11 -O2 -Wall -Wextra -I third_party/onnxruntime/include examples/c_host/main.c \
 *      -o ortquant_c_host -L"$ORT_DIR" -lonnxruntime -Wl,-rpath,"$ORT_DIR"
 *
 * Run:  ./ortquant_c_host MODEL.onnx /path/to/libortquant.so INPUT.f32
 *
 * MODEL.onnx: the output of `ortquant prepare` (a C host gets no Python rewrites). INPUT.f32: the raw float32
 * values of the model's single input, batch 1 (any symbolic dimension is taken as 1). Prints every value of the
 * first output, one per line, with 9 significant digits (enough to round-trip a float32).
 */
#include <onnxruntime_c_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const OrtApi* api;

/* Prints onnxruntime's message and exits when a call fails. */
static void check(OrtStatus* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "%s failed: %s\n", what, api->GetErrorMessage(status));
  api->ReleaseStatus(status);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.onnx LIBORTQUANT.so INPUT.f32\n", argv[0]);
    return 2;
  }
  /* The header is of C API 21; an older runtime (1.19, 1.20) offers only its own version. */
  const OrtApiBase* base = OrtGetApiBase();
  for (uint32_t v = ORT_API_VERSION; api == NULL && v >= 19; --v) api = base->GetApi(v);
  if (api == NULL) {
    fprintf(stderr, "onnxruntime %s is older than 1.19, the oldest ortquant supports\n", base->GetVersionString());
    return 1;
  }

  OrtEnv* env;
  check(api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ortquant_c_host", &env), "CreateEnv");
  OrtSessionOptions* options;
  check(api->CreateSessionOptions(&options), "CreateSessionOptions");
  check(api->SetIntraOpNumThreads(options, 1), "SetIntraOpNumThreads");
  /* onnxruntime loads libortquant.so and owns the handle. */
  check(api->RegisterCustomOpsLibrary_V2(options, argv[2]), "RegisterCustomOpsLibrary_V2");
  OrtSession* session;
  check(api->CreateSession(env, argv[1], options, &session), "CreateSession");

  /* The input's name and shape. */
  OrtAllocator* allocator;
  check(api->GetAllocatorWithDefaultOptions(&allocator), "GetAllocatorWithDefaultOptions");
  char *input_name, *output_name;
  check(api->SessionGetInputName(session, 0, allocator, &input_name), "SessionGetInputName");
  check(api->SessionGetOutputName(session, 0, allocator, &output_name), "SessionGetOutputName");
  OrtTypeInfo* type_info;
  check(api->SessionGetInputTypeInfo(session, 0, &type_info), "SessionGetInputTypeInfo");
  const OrtTensorTypeAndShapeInfo* tensor_info;
  check(api->CastTypeInfoToTensorInfo(type_info, &tensor_info), "CastTypeInfoToTensorInfo");
  size_t rank;
  check(api->GetDimensionsCount(tensor_info, &rank), "GetDimensionsCount");
  int64_t dims[16];
  if (rank > 16) return fprintf(stderr, "input rank %zu > 16\n", rank), 1;
  check(api->GetDimensions(tensor_info, dims, rank), "GetDimensions");
  api->ReleaseTypeInfo(type_info);
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) dims[i] = 1; /* symbolic (batch) dimension */
    count *= (size_t)dims[i];
  }

  /* The input values. */
  float* data = malloc(count * sizeof(float));
  FILE* f = fopen(argv[3], "rb");
  if (data == NULL || f == NULL || fread(data, sizeof(float), count, f) != count) {
    fprintf(stderr, "%s: cannot read %zu float32 values\n", argv[3], count);
    return 1;
  }
  fclose(f);

  OrtMemoryInfo* memory;
  check(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory), "CreateCpuMemoryInfo");
  OrtValue* input = NULL;
  check(api->CreateTensorWithDataAsOrtValue(memory, data, count * sizeof(float), dims, rank,
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &input),
        "CreateTensorWithDataAsOrtValue");
  OrtValue* output = NULL;
  const char* input_names[] = {input_name};
  const char* output_names[] = {output_name};
  check(api->Run(session, NULL, input_names, (const OrtValue* const*)&input, 1, output_names, 1, &output), "Run");

  OrtTensorTypeAndShapeInfo* out_info;
  check(api->GetTensorTypeAndShape(output, &out_info), "GetTensorTypeAndShape");
  size_t out_count;
  check(api->GetTensorShapeElementCount(out_info, &out_count), "GetTensorShapeElementCount");
  api->ReleaseTensorTypeAndShapeInfo(out_info);
  float* y;
  check(api->GetTensorMutableData(output, (void**)&y), "GetTensorMutableData");
  for (size_t i = 0; i < out_count; ++i) printf("%.9g\n", y[i]);

  api->ReleaseValue(output);
  api->ReleaseValue(input);
  api->ReleaseMemoryInfo(memory);
  check(api->AllocatorFree(allocator, input_name), "AllocatorFree");
  check(api->AllocatorFree(allocator, output_name), "AllocatorFree");
  free(data);
  api->ReleaseSession(session);
  api->ReleaseSessionOptions(options);
  api->ReleaseEnv(env);
  return 0;
}

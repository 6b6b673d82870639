# Builds faiss-node's N-API addon against a system faiss (Debian's libfaiss-dev: static libfaiss.a).
# Used by scripts/build-faiss.sh, which copies faiss-node's src/ beside this file (patched for the
# system faiss version) and sets the environment variables read below:
#   NODE_ADDON_API_DIR  node-addon-api's folder (napi.h)
#   FAISS_INCLUDE_DIRS  extra include folders for faiss headers (may be empty: /usr/include is default)
#   FAISS_LIBS          what to link, e.g. "/usr/lib/x86_64-linux-gnu/libfaiss.a -lblas -llapack"
# node-gyp's defaults (-fno-rtti -fno-exceptions -std=gnu++17) are removed: faiss's write()/read()
# rely on RTTI (dynamic_cast) and throw C++ exceptions; with -fno-rtti write() segfaults.
{
  "targets": [
    {
      "target_name": "faiss-node",
      "sources": ["<!@(ls -1 src/*.cc)"],
      "include_dirs": [
        "<!(node -p \"process.env.NODE_ADDON_API_DIR\")",
        "<!@(node -p \"process.env.FAISS_INCLUDE_DIRS || ''\")"
      ],
      "defines": ["NAPI_VERSION=6", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "cflags": ["-O3", "-fopenmp"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-frtti", "-O3", "-fopenmp"],
      "ldflags": ["-fopenmp"],
      "libraries": ["<!@(node -p \"process.env.FAISS_LIBS\")"]
    }
  ]
}

// RUN: xdsl-opt %s -p convert-loop-to-gpu | filecheck %s
// RUN: xdsl-opt %s -p 'convert-loop-to-gpu{block_size=64}' | filecheck %s --check-prefix=B64
// RUN: xdsl-opt %s -p convert-loop-to-gpu,convert-loop-to-upstream | %mlir-opt '--gpu-lower-to-nvvm-pipeline=cubin-chip=sm_90 cubin-features=+ptx80 cubin-format=isa kernel-bare-ptr-calling-convention=true' | filecheck %s --check-prefix=PTX
// REQUIRES: mlir-opt

// Each loop kernel becomes a gpu.module of the same name; each top-level nest one kernel.

// An elementwise nest: a thread per point, 4 blocks of 256 for 1000 points, so the last
// block's threads past 1000 do nothing (the bounds check).
// CHECK-LABEL: "gpu.module"() <{sym_name = "chain"}>
// CHECK:      ^bb0(%[[X:.*]]: memref<1000xf32>, %[[OUT:.*]]: memref<1000xf32>):
// CHECK-NEXT:   %[[BID:.*]] = "gpu.block_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-NEXT:   %[[TID:.*]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-NEXT:   %[[WIDTH:.*]] = arith.constant 256 : index
// CHECK-NEXT:   %[[BASE:.*]] = arith.muli %[[BID]], %[[WIDTH]] : index
// CHECK-NEXT:   %[[I:.*]] = arith.addi %[[BASE]], %[[TID]] : index
// CHECK-NEXT:   %[[N:.*]] = arith.constant 1000 : index
// CHECK-NEXT:   %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[N]] : index
// CHECK-NEXT:   scf.if %[[IN]] {
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[I]]]
// CHECK-NEXT:     %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:     loop.store %[[E]], %[[OUT]][%[[I]]]
// CHECK-NEXT:   }
// CHECK-NEXT:   "gpu.return"() : () -> ()
// CHECK-NEXT: }) {sym_name = "chain", gpu.kernel, workgroup_attributions = 0 : i64}

// A stitched row kernel: a block per row, 128 threads (100 rounded up to whole warps) share
// the row: each reduces its strided share, gpu.all_reduce combines the shares, the init is
// combined last, and the same threads then share the row's loop.
// CHECK-LABEL: "gpu.module"() <{sym_name = "row_max"}>
// CHECK:        %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   %[[ROW:.*]] = "gpu.block_id"()
// CHECK-NEXT:   %[[T:.*]] = "gpu.thread_id"()
// CHECK-NEXT:   %[[IDENTITY:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   %[[LEN:.*]] = arith.constant 100 : index
// CHECK-NEXT:   %[[STEP:.*]] = arith.constant 128 : index
// CHECK-NEXT:   %[[PART:.*]] = scf.for %[[K:.*]] = %[[T]] to %[[LEN]] step %[[STEP]] iter_args(%[[ACC:.*]] = %[[IDENTITY]]) -> (f32) {
// CHECK-NEXT:     %[[V:.*]] = loop.load %{{.*}}[%[[ROW]], %[[K]]]
// CHECK-NEXT:     %[[M:.*]] = arith.maximumf %[[ACC]], %[[V]] fastmath<nsz> : f32
// CHECK-NEXT:     scf.yield %[[M]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[ALL:.*]] = "gpu.all_reduce"(%[[PART]]) <{uniform}> ({
// CHECK:          arith.maximumf
// CHECK:        }) : (f32) -> f32
// CHECK-NEXT:   %[[MAX:.*]] = arith.maximumf %[[NINF]], %[[ALL]] fastmath<nsz> : f32
// CHECK:        scf.for %[[K2:.*]] = %[[T]] to %{{.*}} step %{{.*}} {
// CHECK-NEXT:     %[[W:.*]] = loop.load %{{.*}}[%[[ROW]], %[[K2]]]
// CHECK-NEXT:     arith.subf %[[W]], %[[MAX]] : f32
// CHECK:        "gpu.return"

// The host function launches each kernel on its grid.
// CHECK-LABEL: func.func @main(
// CHECK:      %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[GRID:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[BLOCK:.*]] = arith.constant 256 : index
// CHECK-NEXT: "gpu.launch_func"(%[[GRID]], %[[ONE]], %[[ONE]], %[[BLOCK]], %[[ONE]], %[[ONE]], %x, %y) <{kernel = @chain::@chain
// CHECK:      %[[ROWS:.*]] = arith.constant 6 : index
// CHECK-NEXT: %[[THREADS:.*]] = arith.constant 128 : index
// CHECK-NEXT: "gpu.launch_func"(%[[ROWS]], %{{.*}}, %{{.*}}, %[[THREADS]], %{{.*}}, %{{.*}}, %a, %b) <{kernel = @row_max::@row_max

// A block size of 64: 16 blocks for the 1000 points; rows take 64 threads, two strides.
// B64-LABEL: func.func @main(
// B64:       arith.constant 16 : index
// B64-NEXT:  arith.constant 64 : index
// B64-NEXT:  "gpu.launch_func"
// B64:       arith.constant 6 : index
// B64-NEXT:  arith.constant 64 : index
// B64-NEXT:  "gpu.launch_func"

// mlir-opt builds both into PTX; the row kernel exchanges through warp shuffles.
// PTX-DAG: gpu.binary @chain
// PTX-DAG: gpu.binary @row_max {{.*}}shfl.sync.bfly

builtin.module {
  loop.kernel @chain {
  ^bb0(%x: memref<1000xf32>, %out: memref<1000xf32>):
    loop.parallel [1000] {
    ^bb1(%i: index):
      %v = loop.load %x[%i] : memref<1000xf32> -> f32
      %e = math.exp %v : f32
      loop.store %e, %out[%i] : f32, memref<1000xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @row_max {
  ^bb0(%x: memref<6x100xf32>, %out: memref<6x100xf32>):
    %ninf = arith.constant 0xff800000 : f32
    loop.parallel [6] {
    ^bb1(%r: index):
      %m = loop.reduce max [100] init(%ninf : f32) {
      ^bb2(%k: index):
        %v = loop.load %x[%r, %k] : memref<6x100xf32> -> f32
        loop.yield %v : f32
      }
      loop.parallel [100] {
      ^bb3(%k2: index):
        %w = loop.load %x[%r, %k2] : memref<6x100xf32> -> f32
        %d = arith.subf %w, %m : f32
        loop.store %d, %out[%r, %k2] : f32, memref<6x100xf32>
        loop.yield
      }
      loop.yield
    }
    loop.yield
  }
  func.func @main(%x: memref<1000xf32>, %y: memref<1000xf32>, %a: memref<6x100xf32>, %b: memref<6x100xf32>) {
    loop.call @chain(%x, %y) : memref<1000xf32>, memref<1000xf32>
    loop.call @row_max(%a, %b) : memref<6x100xf32>, memref<6x100xf32>
    func.return
  }
}

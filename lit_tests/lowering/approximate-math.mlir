// RUN: xdsl-opt %s -p graphfuse-approximate-math --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p graphfuse-approximate-math --split-input-file | filecheck %s --check-prefix=GONE

// No math.tanh, math.erf or f32 math.exp is left before the last case (the one that keeps
// them).
// GONE-NOT: math.tanh
// GONE-NOT: math.erf
// GONE-NOT: math.exp
// GONE:     func.func @left_alone

// tanh: x clamped to [-9, 9] (nsz: the zero's sign comes from x * P / Q), then c P(c^2) / Q(c^2) (multiply-adds LLVM may fuse), and
// exactly +-1 (copysign) where |x| >= 9; a select, no branch, so the loop around it
// vectorises.
// CHECK-LABEL: func.func @tanh(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK-NEXT:  %[[NINE:.*]] = arith.constant 9.000000e+00 : f32
// CHECK-NEXT:  %[[LOW:.*]] = arith.negf %[[NINE]] : f32
// CHECK-NEXT:  %[[A:.*]] = arith.maximumf %[[X]], %[[LOW]] fastmath<nsz> : f32
// CHECK-NEXT:  %[[C:.*]] = arith.minimumf %[[A]], %[[NINE]] fastmath<nsz> : f32
// CHECK-NEXT:  %[[Z:.*]] = arith.mulf %[[C]], %[[C]] fastmath<contract> : f32
// CHECK:       %[[P0:.*]] = arith.constant 0.99999994 : f32
// CHECK-NEXT:  %[[P:.*]] = arith.addf %{{.*}}, %[[P0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[CP:.*]] = arith.mulf %[[C]], %[[P]] fastmath<contract> : f32
// CHECK:       %[[Q0:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:  %[[Q:.*]] = arith.addf %{{.*}}, %[[Q0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[R:.*]] = arith.divf %[[CP]], %[[Q]] : f32
// CHECK-NEXT:  %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK-NEXT:  %[[SAT:.*]] = arith.cmpf oge, %[[ABS]], %[[NINE]] : f32
// CHECK-NEXT:  %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:  %[[SIGNED:.*]] = math.copysign %[[ONE]], %[[X]] : f32
// CHECK-NEXT:  %[[T:.*]] = arith.select %[[SAT]], %[[SIGNED]], %[[R]] : f32
// CHECK-NEXT:  func.return %[[T]] : f32
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  func.return %0 : f32
}

// -----

// erf: x clamped to [-4, 4], then x * P(x^2) / Q(x^2).
// CHECK-LABEL: func.func @erf(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK:       %[[LOW:.*]] = arith.constant -4.000000e+00 : f32
// CHECK-NEXT:  %[[A:.*]] = arith.maximumf %[[X]], %[[LOW]] : f32
// CHECK-NEXT:  %[[HIGH:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:  %[[C:.*]] = arith.minimumf %[[A]], %[[HIGH]] : f32
// CHECK-NEXT:  %[[Z:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK:       %[[P:.*]] = arith.mulf %{{.*}}, %[[C]] : f32
// CHECK:       %[[R:.*]] = arith.divf %[[P]], %{{.*}} : f32
// CHECK-NEXT:  func.return %[[R]] : f32
func.func @erf(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  func.return %0 : f32
}

// -----

// exp: x clamped above to 89 as `89 < x ? 89 : x` (NaN kept), n = round(x / ln2) by
// adding 1.5 * 2^23, r = x - n ln2 in two steps, 2 exp(r) as (2r + 2) + r^2 2P(r)
// (multiply-adds LLVM may fuse), times 2^(n-1) from t's low bits shifted into the exponent
// (126 << 23 = 1056964608 is the bias less one), so exp(x > 88.72) overflows to inf in that
// product; then 0 below -86.99.
// CHECK-LABEL: func.func @exp(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK-NEXT:  %[[LIMIT:.*]] = arith.constant 8.900000e+01 : f32
// CHECK-NEXT:  %[[OVER:.*]] = arith.cmpf olt, %[[LIMIT]], %[[X]] : f32
// CHECK-NEXT:  %[[XC:.*]] = arith.select %[[OVER]], %[[LIMIT]], %[[X]] : f32
// CHECK:       %[[XL:.*]] = arith.mulf %[[XC]], %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:  %[[ROUNDER:.*]] = arith.constant 0x4B400000 : f32
// CHECK-NEXT:  %[[T:.*]] = arith.addf %[[XL]], %[[ROUNDER]] fastmath<contract> : f32
// CHECK-NEXT:  %[[ROUNDER2:.*]] = arith.constant 0x4B400000 : f32
// CHECK-NEXT:  %[[N:.*]] = arith.subf %[[T]], %[[ROUNDER2]] : f32
// CHECK-NEXT:  %[[HIGH:.*]] = arith.constant 0.693359375 : f32
// CHECK-NEXT:  %[[NH:.*]] = arith.mulf %[[N]], %[[HIGH]] fastmath<contract> : f32
// CHECK-NEXT:  %[[R1:.*]] = arith.subf %[[XC]], %[[NH]] fastmath<contract> : f32
// CHECK:       %[[R:.*]] = arith.subf %[[R1]], %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:  %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:  %[[R2:.*]] = arith.mulf %[[R]], %[[TWO]] fastmath<contract> : f32
// CHECK-NEXT:  %[[HEAD:.*]] = arith.addf %[[R2]], %[[TWO]] fastmath<contract> : f32
// CHECK:       %[[C0:.*]] = arith.constant 0.999999881 : f32
// CHECK-NEXT:  %[[P:.*]] = arith.addf %{{.*}}, %[[C0]] fastmath<contract> : f32
// CHECK-NEXT:  %[[RR:.*]] = arith.mulf %[[R]], %[[R]] fastmath<contract> : f32
// CHECK-NEXT:  %[[TAIL:.*]] = arith.mulf %[[P]], %[[RR]] fastmath<contract> : f32
// CHECK-NEXT:  %[[Y:.*]] = arith.addf %[[TAIL]], %[[HEAD]] fastmath<contract> : f32
// CHECK-NEXT:  %[[TI:.*]] = arith.bitcast %[[T]] : f32 to i32
// CHECK-NEXT:  %[[C23:.*]] = arith.constant 23 : i32
// CHECK-NEXT:  %[[BITS:.*]] = arith.shli %[[TI]], %[[C23]] : i32
// CHECK-NEXT:  %[[BIAS:.*]] = arith.constant 1056964608 : i32
// CHECK-NEXT:  %[[SB:.*]] = arith.addi %[[BITS]], %[[BIAS]] : i32
// CHECK-NEXT:  %[[HALF:.*]] = arith.bitcast %[[SB]] : i32 to f32
// CHECK-NEXT:  %[[V:.*]] = arith.mulf %[[Y]], %[[HALF]] fastmath<contract> : f32
// CHECK-NEXT:  %[[LOW:.*]] = arith.constant -86.9896317 : f32
// CHECK-NEXT:  %[[TINY:.*]] = arith.cmpf olt, %[[XC]], %[[LOW]] : f32
// CHECK-NEXT:  %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  %[[E:.*]] = arith.select %[[TINY]], %[[ZERO]], %[[V]] : f32
// CHECK-NEXT:  func.return %[[E]] : f32
func.func @exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  func.return %0 : f32
}

// -----

// Inside loops too (the walk reaches nested regions).
// CHECK-LABEL: func.func @in_loop(
// CHECK:       scf.for
// CHECK:       arith.cmpf oge
// CHECK:       arith.select
// CHECK:       memref.store
func.func @in_loop(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%i] : memref<8xf32>
  }
  func.return
}

// -----

// Only scalar f32 is rewritten: f16 and vectors keep their math ops.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NEXT:  math.tanh %{{.*}} : f16
// CHECK-NEXT:  math.erf %{{.*}} : f16
// CHECK-NEXT:  math.tanh %{{.*}} : vector<4xf32>
// CHECK-NEXT:  math.exp %{{.*}} : f16
// CHECK-NEXT:  func.return
func.func @left_alone(%h: f16, %v: vector<4xf32>) -> (f16, f16, vector<4xf32>, f16) {
  %0 = math.tanh %h : f16
  %1 = math.erf %h : f16
  %2 = math.tanh %v : vector<4xf32>
  %3 = math.exp %h : f16
  func.return %0, %1, %2, %3 : f16, f16, vector<4xf32>, f16
}

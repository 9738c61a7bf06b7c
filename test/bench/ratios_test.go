package main

import "testing"

// The machine's CPU counts the operator and the harness with the control
// plane; the same work's counts only the components that do the same in
// both runs, however much the apiserver and etcd differ; the all Ready
// ratio at equal cost divides by the same work's.
func TestCPURatiosAgainstTheFloor(t *testing.T) {
	r := &report{
		Ours: &operatorRun{CPUSeconds: 20, AllReadySeconds: 170, ControlPlaneCPUSeconds: map[string]float64{
			"kube-apiserver": 150, "etcd": 30, "kube-controller-manager": 50, "kube-scheduler": 30, "kwok": 20,
			"total": 280, "harness": 3}},
		Floor: &floorRun{AllReadySeconds: 150, ControlPlaneCPUSeconds: map[string]float64{
			"kube-apiserver": 100, "etcd": 20, "kube-controller-manager": 40, "kube-scheduler": 25, "kwok": 15,
			"total": 200, "harness": 6}},
		Ratios: map[string]float64{},
	}
	r.computeRatios()
	for name, want := range map[string]float64{
		"oursMachineCPUOverFloor":  1.471, // (280 + 3 + 20) / (200 + 6)
		"oursSameWorkCPUOverFloor": 1.25,  // (50 + 30 + 20) / (40 + 25 + 15)
		// (170 / 150) / 1.25: ours took 13 % longer, with the same work 25 %
		// dearer in its run.
		"oursAllReadyOverFloorReadyAtEqualCost": 0.907,
	} {
		if got := r.Ratios[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// The floor's Ready is its Deployment's pods ready; ours' figure for the
// same moment is set beside it, apart from ours' Ready.
func TestOursPodsReadyAgainstTheFloorsReady(t *testing.T) {
	r := &report{
		Ours:   &operatorRun{AllReadySeconds: 170, AllServedSeconds: 160},
		Floor:  &floorRun{AllReadySeconds: 150},
		Ratios: map[string]float64{},
	}
	r.computeRatios()
	if got := r.Ratios["oursAllServedOverFloorReady"]; got != 1.067 {
		t.Errorf("oursAllServedOverFloorReady = %v, want 1.067 (160 / 150)", got)
	}
	if got := r.Ratios["oursAllReadyOverFloorReady"]; got != 1.133 {
		t.Errorf("oursAllReadyOverFloorReady = %v, want 1.133 (170 / 150)", got)
	}
}

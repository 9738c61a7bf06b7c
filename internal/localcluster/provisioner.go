package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The real node's StorageClass is served by a provisioner that runs in
// this process: each claim gets a tmpfs mounted under the cluster's
// directory with exactly the claim's size, exposed as a local
// PersistentVolume on the real node. The size is real (a model that does
// not fit fails with ENOSPC, and statfs says how much is free), fsGroup
// applies (local volumes support ownership changes), and a released
// volume's data is deleted with it. The mounts are the teardown's to
// remove if this process dies.

const provisionerPoll = 500 * time.Millisecond

func (c *Cluster) startProvisioner(ctx context.Context, cs kubernetes.Interface) error {
	immediate := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        RealNodeStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       realNodeProvisioner,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &immediate,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create storage class %s: %w", RealNodeStorageClass, err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	c.node.stopProv, c.node.provDone = cancel, make(chan struct{})
	go func() {
		defer close(c.node.provDone)
		for {
			if err := c.provisionOnce(pctx, cs); err != nil && pctx.Err() == nil {
				c.opts.Logf("provisioner: %v", err)
			}
			select {
			case <-pctx.Done():
				return
			case <-time.After(provisionerPoll):
			}
		}
	}()
	return nil
}

func (c *Cluster) provisionOnce(ctx context.Context, cs kubernetes.Interface) error {
	var errs []error
	claims, err := cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != RealNodeStorageClass ||
			pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
			continue
		}
		errs = append(errs, c.provision(ctx, cs, pvc))
	}
	volumes, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range volumes.Items {
		pv := &volumes.Items[i]
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != realNodeProvisioner {
			continue
		}
		if pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
			errs = append(errs, c.deprovision(ctx, cs, pv))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) volumeDir(pvName string) string {
	return filepath.Join(c.node.layout.volumesDir(), pvName)
}

func (c *Cluster) provision(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) error {
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return fmt.Errorf("claim %s/%s requests no storage", pvc.Namespace, pvc.Name)
	}
	name := "pvc-" + string(pvc.UID)
	dir := c.volumeDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(mountsUnder(dir)) == 0 {
		// World-writable with the sticky bit, like /tmp: the kubelet does
		// not reliably apply a pod's fsGroup to a local volume that other
		// pods mount read-only at the same moment (seen: the fetch pod got
		// "permission denied" while the serving pods started beside it).
		opts := fmt.Sprintf("size=%d,mode=1777", size.Value())
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount a %s tmpfs for %s/%s: %w", size.String(), pvc.Namespace, pvc.Name, err)
		}
	}
	volumeMode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": realNodeProvisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size.String())},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              RealNodeStorageClass,
			VolumeMode:                    &volumeMode,
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1", Kind: "PersistentVolumeClaim",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{RealNodeName},
				}}}},
			}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create volume for %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

func (c *Cluster) deprovision(ctx context.Context, cs kubernetes.Interface, pv *corev1.PersistentVolume) error {
	dir := c.volumeDir(pv.Name)
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

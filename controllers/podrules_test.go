package controllers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses holds the
// operator's copy of the apiserver's rules for container resources and
// environment, tolerations, affinity and topology spread constraints to
// the apiserver itself: each case's settings go on a pod
// that the apiserver is asked to create (a dry run), and the operator's
// validation must refuse the ModelServer exactly when the apiserver
// refuses the pod. Settings a feature gate decides (Lt and Gt
// tolerations) are only checked not to be refused by the operator.
func TestTheOperatorRefusesThePodSettingsTheAPIServerRefuses(t *testing.T) {
	ns := newNamespace(t)
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	seconds := ptrTo[int64](30)
	type settings struct {
		resources   corev1.ResourceRequirements
		tolerations []corev1.Toleration
		affinity    *corev1.Affinity
		spread      []corev1.TopologySpreadConstraint
		env         []corev1.EnvVar
	}
	envVar := func(name, value string, from *corev1.EnvVarSource) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: name, Value: value, ValueFrom: from}}
	}
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	secretRef := func(name, key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
	}
	nodeTerm := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	preferred := func(weight int32, term corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: weight, Preference: term}}}}
	}
	byField := func(key string, op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
		return required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}})
	}
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tf"}}
	antiRequired := func(term corev1.PodAffinityTerm) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
	podPreferred := func(weight int32, term corev1.PodAffinityTerm) *corev1.Affinity {
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: weight, PodAffinityTerm: term}}}}
	}
	spread := func(mutate ...func(*corev1.TopologySpreadConstraint)) []corev1.TopologySpreadConstraint {
		c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: app}
		for _, m := range mutate {
			m(&c)
		}
		return []corev1.TopologySpreadConstraint{c}
	}
	policy := func(p corev1.NodeInclusionPolicy) *corev1.NodeInclusionPolicy { return &p }
	cases := map[string]settings{
		"request over limit":                 {resources: corev1.ResourceRequirements{Limits: list("memory", "1Gi"), Requests: list("memory", "2Gi")}},
		"request at limit":                   {resources: corev1.ResourceRequirements{Limits: list("memory", "1Gi"), Requests: list("memory", "1Gi")}},
		"request under limit":                {resources: corev1.ResourceRequirements{Limits: list("cpu", "2"), Requests: list("cpu", "250m")}},
		"requests alone":                     {resources: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi", "ephemeral-storage", "2Gi")}},
		"GPU limit alone":                    {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "1")}},
		"GPU request alone":                  {resources: corev1.ResourceRequirements{Requests: list("nvidia.com/gpu", "1")}},
		"GPU request under limit":            {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "2"), Requests: list("nvidia.com/gpu", "1")}},
		"half a GPU":                         {resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "500m")}},
		"unprefixed unknown resource":        {resources: corev1.ResourceRequirements{Limits: list("gpu", "1")}},
		"kubernetes.io resource":             {resources: corev1.ResourceRequirements{Limits: list("example.kubernetes.io/thing", "1")}},
		"requests.-prefixed domain resource": {resources: corev1.ResourceRequirements{Limits: list("requests.example.com/thing", "1")}},
		"negative cpu":                       {resources: corev1.ResourceRequirements{Limits: list("cpu", "-1")}},
		"huge pages alone":                   {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi"), Requests: list("hugepages-2Mi", "4Mi")}},
		"huge pages with memory":             {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi", "memory", "1Gi"), Requests: list("hugepages-2Mi", "4Mi")}},
		"huge pages request under limit":     {resources: corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "4Mi", "memory", "1Gi"), Requests: list("hugepages-2Mi", "2Mi")}},
		"resource claim":                     {resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}},
		"toleration of everything":           {tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		"toleration of every key, Equal":     {tolerations: []corev1.Toleration{{Value: "x"}}},
		"toleration Exists with a value":     {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}},
		"toleration Equal":                   {tolerations: []corev1.Toleration{{Key: "example.com/pool", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}},
		"toleration value not a label value": {tolerations: []corev1.Toleration{{Key: "k", Value: "a b"}}},
		"toleration key with a space":        {tolerations: []corev1.Toleration{{Key: "a b", Operator: corev1.TolerationOpExists}}},
		"toleration seconds, NoExecute":      {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}},
		"toleration seconds, NoSchedule":     {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: seconds}}},
		"toleration effect misspelt":         {tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "NoScheduled"}}},
		"toleration operator misspelt":       {tolerations: []corev1.Toleration{{Key: "k", Operator: "Equals", Value: "v"}}},

		"node affinity In":                        {affinity: required(nodeTerm("example.com/pool", corev1.NodeSelectorOpIn, "ml"))},
		"node affinity In without values":         {affinity: required(nodeTerm("example.com/pool", corev1.NodeSelectorOpIn))},
		"node affinity Exists with values":        {affinity: required(nodeTerm("example.com/pool", corev1.NodeSelectorOpExists, "ml"))},
		"node affinity Gt with two values":        {affinity: required(nodeTerm("example.com/gen", corev1.NodeSelectorOpGt, "1", "2"))},
		"node affinity Gt":                        {affinity: required(nodeTerm("example.com/gen", corev1.NodeSelectorOpGt, "1"))},
		"node affinity operator misspelt":         {affinity: required(nodeTerm("example.com/pool", "Equals", "ml"))},
		"node affinity key with a space":          {affinity: required(nodeTerm("a b", corev1.NodeSelectorOpExists))},
		"node affinity value not a label value":   {affinity: required(nodeTerm("example.com/pool", corev1.NodeSelectorOpIn, "a b"))},
		"node affinity without terms":             {affinity: required()},
		"node affinity with an empty term":        {affinity: required(corev1.NodeSelectorTerm{})},
		"node preference weight 0":                {affinity: preferred(0, nodeTerm("example.com/pool", corev1.NodeSelectorOpIn, "ml"))},
		"node preference weight 101":              {affinity: preferred(101, nodeTerm("example.com/pool", corev1.NodeSelectorOpIn, "ml"))},
		"node preference of a value not a label":  {affinity: preferred(50, nodeTerm("example.com/pool", corev1.NodeSelectorOpIn, "a b"))},
		"node preference In without values":       {affinity: preferred(50, nodeTerm("example.com/pool", corev1.NodeSelectorOpIn))},
		"node field metadata.name":                {affinity: byField("metadata.name", corev1.NodeSelectorOpIn, "node-1")},
		"node field other than metadata.name":     {affinity: byField("spec.unschedulable", corev1.NodeSelectorOpIn, "true")},
		"node field with two names":               {affinity: byField("metadata.name", corev1.NodeSelectorOpIn, "a", "b")},
		"node field Exists":                       {affinity: byField("metadata.name", corev1.NodeSelectorOpExists)},
		"node field not a node name":              {affinity: byField("metadata.name", corev1.NodeSelectorOpIn, "Node_1")},
		"pod anti-affinity":                       {affinity: antiRequired(corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "kubernetes.io/hostname"})},
		"pod anti-affinity without topology key":  {affinity: antiRequired(corev1.PodAffinityTerm{LabelSelector: app})},
		"pod anti-affinity topology key a b":      {affinity: antiRequired(corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "a b"})},
		"pod anti-affinity bad selector operator": {affinity: antiRequired(corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"tf"}}}}})},
		"pod anti-affinity selector In no values": {affinity: antiRequired(corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}})},
		"pod anti-affinity bad namespace":         {affinity: antiRequired(corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"ML_Team"}})},
		"pod anti-affinity bad namespaceSelector": {affinity: antiRequired(corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}}})},
		"pod affinity weight 0":                   {affinity: podPreferred(0, corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "kubernetes.io/hostname"})},
		"pod affinity preferred":                  {affinity: podPreferred(100, corev1.PodAffinityTerm{LabelSelector: app, TopologyKey: "kubernetes.io/hostname"})},

		"spread":                                {spread: spread()},
		"spread maxSkew 0":                      {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.MaxSkew = 0 })},
		"spread without topology key":           {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "" })},
		"spread topology key a b":               {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "a b" })},
		"spread whenUnsatisfiable misspelt":     {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = "DoNotScheduled" })},
		"spread minDomains with ScheduleAnyway": {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptrTo[int32](2) })},
		"spread minDomains with DoNotSchedule": {spread: spread(func(c *corev1.TopologySpreadConstraint) {
			c.MinDomains, c.WhenUnsatisfiable = ptrTo[int32](2), corev1.DoNotSchedule
		})},
		"spread minDomains 0": {spread: spread(func(c *corev1.TopologySpreadConstraint) {
			c.MinDomains, c.WhenUnsatisfiable = ptrTo[int32](0), corev1.DoNotSchedule
		})},
		"spread node policy misspelt": {spread: spread(func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = policy("Honour") })},
		"spread node policies": {spread: spread(func(c *corev1.TopologySpreadConstraint) {
			c.NodeTaintsPolicy, c.NodeAffinityPolicy = policy("Honor"), policy("Ignore")
		})},
		"spread bad selector": {spread: spread(func(c *corev1.TopologySpreadConstraint) {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a b"}}
		})},
		"spread twice the same key/when": {spread: append(spread(), spread(func(c *corev1.TopologySpreadConstraint) { c.MaxSkew = 2 })...)},
		"spread on two keys":             {spread: append(spread(), spread(func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "kubernetes.io/hostname" })...)},

		"env":                            {env: envVar("MODEL_CACHE", "1", nil)},
		"env name with a digit first":    {env: envVar("1ST", "1", nil)},
		"env name with a dash and space": {env: envVar("my-var x", "1", nil)},
		"env name with =":                {env: envVar("A=B", "1", nil)},
		"env name not ASCII":             {env: envVar("MODÈLE", "1", nil)},
		"env of no source":               {env: envVar("A", "", &corev1.EnvVarSource{})},
		"env of a value and a source":    {env: envVar("A", "1", fieldRef("metadata.name"))},
		"env of two sources":             {env: envVar("A", "", &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, SecretKeyRef: secretRef("s", "k").SecretKeyRef})},
		"env of the pod's name":          {env: envVar("A", "", fieldRef("metadata.name"))},
		"env of the pod's IPs":           {env: envVar("A", "", fieldRef("status.podIPs"))},
		"env of a label":                 {env: envVar("A", "", fieldRef("metadata.labels['app']"))},
		"env of a label key a b":         {env: envVar("A", "", fieldRef("metadata.labels['a b']"))},
		"env of an annotation":           {env: envVar("A", "", fieldRef("metadata.annotations['Example.com/Team']"))},
		"env of all labels":              {env: envVar("A", "", fieldRef("metadata.labels"))},
		"env of the pod's node's name":   {env: envVar("A", "", fieldRef("spec.nodeName"))},
		"env of an unknown field":        {env: envVar("A", "", fieldRef("spec.schedulerName"))},
		"env of a container's memory":    {env: envVar("A", "", &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}})},
		"env of a container's GPUs":      {env: envVar("A", "", &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.nvidia.com/gpu"}})},
		"env of huge pages":              {env: envVar("A", "", &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.hugepages-2Mi"}})},
		"env of a Secret's key":          {env: envVar("A", "", secretRef("creds", "token.json"))},
		"env of a Secret named Bad_Name": {env: envVar("A", "", secretRef("Bad_Name", "k"))},
		"env of a Secret's key a/b":      {env: envVar("A", "", secretRef("creds", "a/b"))},
		"env of a Secret without a key":  {env: envVar("A", "", secretRef("creds", ""))},
		"env of a ConfigMap's key": {env: envVar("A", "", &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "level"}})},
		"env of a ConfigMap without a name": {env: envVar("A", "", &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "level"}})},
	}
	gated := map[string]settings{
		"toleration Gt": {tolerations: []corev1.Toleration{{Key: "example.com/generation", Operator: corev1.TolerationOpGt, Value: "3"}}},
		"toleration Lt": {tolerations: []corev1.Toleration{{Key: "example.com/generation", Operator: corev1.TolerationOpLt, Value: "10"}}},
	}
	check := func(name string, s settings, apiserverDecides bool) {
		t.Run(name, func(t *testing.T) {
			_, refused := values.Validate(newModelServer(ns, "rules", func(ms *servingv1alpha1.ModelServer) {
				ms.Spec.Resources = s.resources
				ms.Spec.PodTemplate.Tolerations = s.tolerations
				ms.Spec.PodTemplate.Affinity = s.affinity
				ms.Spec.PodTemplate.TopologySpreadConstraints = s.spread
				ms.Spec.PodTemplate.Env = s.env
			}))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rules-"},
				Spec: corev1.PodSpec{
					Containers:                []corev1.Container{{Name: "c", Image: "example.com/c:1", Resources: s.resources, Env: s.env}},
					Tolerations:               s.tolerations,
					Affinity:                  s.affinity,
					TopologySpreadConstraints: s.spread,
				},
			}
			apiErr := env.client.Create(context.Background(), pod, client.DryRunAll)
			switch {
			case !apiserverDecides && refused != nil:
				t.Errorf("the operator refuses what a feature gate may allow: %v (the apiserver here: %v)", refused, apiErr)
			case apiserverDecides && (refused != nil) != (apiErr != nil):
				t.Errorf("the operator: %v\nthe apiserver: %v", refused, apiErr)
			}
		})
	}
	for name, s := range cases {
		check(name, s, true)
	}
	for name, s := range gated {
		check(name, s, false)
	}
}

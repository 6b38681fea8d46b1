import json

from django import forms

from hitl.registry import registry


class StartThreadForm(forms.Form):
    graph = forms.ChoiceField(choices=())
    title = forms.CharField(max_length=200, required=False)
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, initial="{}")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["graph"].choices = [(name, name) for name in registry.names()]

    def clean_input(self):
        raw = self.cleaned_data["input"].strip() or "{}"
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Input is not valid JSON: {exc.msg}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Input must be a JSON object.")
        return value


class DecisionForm(forms.Form):
    type = forms.ChoiceField(choices=[(t, t) for t in ("accept", "edit", "response", "ignore")])
    response = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    edit_args = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))

    def decision_args(self, action: str):
        kind = self.cleaned_data["type"]
        if kind == "response":
            return self.cleaned_data["response"]
        if kind == "edit":
            raw = self.cleaned_data["edit_args"] or "{}"
            try:
                args = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(f"Edited args are not valid JSON: {exc.msg}.") from None
            return {"action": action, "args": args}
        return None

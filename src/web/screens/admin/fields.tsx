// The refusal helpers moved to the components (used by every form); kept here for the admin screens' imports.
export { FieldError, useRefusal } from '../../components';
